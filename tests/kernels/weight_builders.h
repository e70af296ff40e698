// Test-side encoders: build weights of every type from chosen codes and
// scales, written straight from the format descriptions (GGUF blocks,
// core/pq_format.h), together with the exact float values they stand for.
// The library's readers are checked against these, never against themselves.
// Free of GoogleTest (a bad request throws std::invalid_argument, which a
// test reports as a failure) so the kernel fuzz target can use them too.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/tensor.h"
#include "util/half.h"

namespace pocket::test {

// A weight matrix's shape and PQ group size, as the matmul tests list them.
struct WeightShape {
  int64_t rows, cols;
  int group;
};

struct BuiltWeight {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // rows * cols, the exact values encoded
  TensorView view;
  // Quantized types only: the integer code of each element as stored (Q4_0,
  // Q4_1 and PQ4: the unsigned nibble 0..15; Q5_0/Q5_1/PQ5: 0..31; Q8_0 and PQ8: the signed byte) and,
  // per row and block of 32 columns (rows * ceil(cols / 32)), the scale and
  // offset with value = scale * code + offset (Q4_0: offset = -8 * d).
  std::vector<int> codes;
  std::vector<float> block_scale, block_offset;
};

// Chooses the code of element (r, k) instead of the random one (the random
// draw still happens, so the scales are those of the same seed). It must
// return a code the type can store: 0..15 for Q4_0, Q4_1 and PQ4, 0..31 for Q5_0,
// Q5_1 and PQ5, -128..127 for
// Q8_0, -127..127 for PQ8.
using CodeFn = std::function<int(int64_t r, int64_t k)>;

// A random fp16 scale in [lo, hi) that is exactly representable.
inline float random_half(Rng& rng, float lo, float hi) { return f16_to_f32(f32_to_f16(rng.uniform(lo, hi))); }

inline void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xff);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

inline BuiltWeight build_weight(DType type, int64_t rows, int64_t cols, int group, uint64_t seed,
                                const CodeFn& code_fn = {}) {
  Rng rng(seed);
  BuiltWeight w;
  w.values.assign(static_cast<size_t>(rows * cols), 0.0f);
  auto val = [&](int64_t r, int64_t k) -> float& { return w.values[static_cast<size_t>(r * cols + k)]; };
  const int64_t blocks32 = (cols + 31) / 32;
  const bool quantized = type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 ||
                         type == DType::Q5_1 || type == DType::PQ4 || type == DType::PQ5 || type == DType::PQ8;
  if (quantized) {
    w.codes.assign(static_cast<size_t>(rows * cols), 0);
    w.block_scale.assign(static_cast<size_t>(rows * blocks32), 0.0f);
    w.block_offset.assign(w.block_scale.size(), 0.0f);
  }
  // The random code, or the chosen one (checked against [lo, hi]); recorded.
  auto pick = [&](int64_t r, int64_t k, int random_code, int lo, int hi) {
    int q = code_fn ? code_fn(r, k) : random_code;
    if (q < lo || q > hi)
      throw std::invalid_argument("build_weight: code " + std::to_string(q) + " out of [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "] for " + std::string(dtype_name(type)));
    w.codes[static_cast<size_t>(r * cols + k)] = q;
    return q;
  };
  auto set_block = [&](int64_t r, int64_t k, float scale, float offset) {
    w.block_scale[static_cast<size_t>(r * blocks32 + k / 32)] = scale;
    w.block_offset[static_cast<size_t>(r * blocks32 + k / 32)] = offset;
  };
  switch (type) {
    case DType::F32:
      w.bytes.resize(static_cast<size_t>(rows * cols * 4));
      for (int64_t i = 0; i < rows * cols; ++i) {
        w.values[i] = rng.uniform();
        std::memcpy(&w.bytes[i * 4], &w.values[i], 4);
      }
      break;
    case DType::F16:
    case DType::BF16:
      w.bytes.resize(static_cast<size_t>(rows * cols * 2));
      for (int64_t i = 0; i < rows * cols; ++i) {
        float f = rng.uniform();
        uint16_t h = type == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
        w.values[i] = type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        put_u16(w.bytes, i * 2, h);
      }
      break;
    case DType::Q8_0:
    case DType::Q4_0: {
      const int bb = type == DType::Q8_0 ? 34 : 18;
      w.bytes.resize(static_cast<size_t>(rows * cols / 32 * bb));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < cols / 32; ++b) {
          size_t at = static_cast<size_t>((r * (cols / 32) + b) * bb);
          float d = random_half(rng, 0.001f, 0.05f);
          put_u16(w.bytes, at, f32_to_f16(d));
          set_block(r, b * 32, d, type == DType::Q8_0 ? 0.0f : -8.0f * d);
          for (int j = 0; j < 32; ++j) {
            if (type == DType::Q8_0) {
              int q = pick(r, b * 32 + j, static_cast<int>(rng.next() % 255) - 127, -128, 127);
              w.bytes[at + 2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
              val(r, b * 32 + j) = d * q;
            } else {
              int q = pick(r, b * 32 + j, static_cast<int>(rng.next() % 16), 0, 15);
              w.bytes[at + 2 + j % 16] |= static_cast<uint8_t>(j < 16 ? q : q << 4);
              val(r, b * 32 + j) = d * (q - 8);
            }
          }
        }
      break;
    }
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1: {
      // d, (Q4_1/Q5_1: m), (Q5_0/Q5_1: qh, bit j the fifth bit of element j), 16 nibble bytes.
      const bool five = type != DType::Q4_1, has_min = type != DType::Q5_0;
      const int bb = 2 + (has_min ? 2 : 0) + (five ? 4 : 0) + 16;
      const int hi = five ? 31 : 15;
      w.bytes.assign(static_cast<size_t>(rows * cols / 32 * bb), 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < cols / 32; ++b) {
          size_t at = static_cast<size_t>((r * (cols / 32) + b) * bb);
          const float d = random_half(rng, 0.001f, 0.05f);
          const float m = has_min ? random_half(rng, -0.5f, 0.5f) : -16.0f * d;
          put_u16(w.bytes, at, f32_to_f16(d));
          if (has_min) put_u16(w.bytes, at + 2, f32_to_f16(m));
          const size_t qh_at = at + (has_min ? 4 : 2), qs_at = qh_at + (five ? 4 : 0);
          set_block(r, b * 32, d, m);
          for (int j = 0; j < 32; ++j) {
            const int q = pick(r, b * 32 + j, static_cast<int>(rng.next() % static_cast<uint64_t>(hi + 1)), 0, hi);
            w.bytes[qs_at + j % 16] |= static_cast<uint8_t>(j < 16 ? (q & 15) : (q & 15) << 4);
            if (five && (q & 16)) w.bytes[qh_at + j / 8] |= static_cast<uint8_t>(1u << (j % 8));
            val(r, b * 32 + j) = d * q + m;
          }
        }
      break;
    }
    case DType::PQ4:
    case DType::PQ5:
    case DType::PQ8: {
      // PQ5 is PQ4 (q4 below) with a fifth bit per code: per 32 columns, the
      // 256 bytes of PQ4's 4 chunks, then a 64-byte plane whose byte i holds,
      // at bit 2c + h, bit 4 of the code in nibble h of the chunk-c byte i.
      const bool q4 = type != DType::PQ8, five = type == DType::PQ5;
      const int64_t groups = (cols + group - 1) / group, tiles = (rows + 15) / 16;
      const int64_t gblock = 16 * (q4 ? group / 2 + 4 + (five ? group / 8 : 0) : group + 2);
      w.bytes.assign(static_cast<size_t>(tiles * groups * gblock), 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          size_t blk = static_cast<size_t>(((r / 16) * groups + g) * gblock);
          int64_t rr = r % 16;
          float s = random_half(rng, 0.001f, 0.05f);
          float m = q4 ? random_half(rng, -0.4f, 0.0f) : 0.0f;
          put_u16(w.bytes, blk + 2 * rr, f32_to_f16(s));
          if (q4) put_u16(w.bytes, blk + 32 + 2 * rr, f32_to_f16(m));
          size_t data = blk + (q4 ? 64 : 32);
          for (int64_t k = 0; k < group && g * group + k < cols; k += 32) set_block(r, g * group + k, s, m);
          for (int64_t k = 0; k < group && g * group + k < cols; ++k) {
            if (five) {
              int q = pick(r, g * group + k, static_cast<int>(rng.next() % 32), 0, 31);
              const size_t sub = data + (k / 32) * 320, i = static_cast<size_t>(4 * rr + k % 4);
              const int c = static_cast<int>(k % 32 / 8), h = (k % 8) < 4 ? 0 : 1;
              w.bytes[sub + 64 * c + i] |= static_cast<uint8_t>((q & 15) << (4 * h));
              if (q & 16) w.bytes[sub + 256 + i] |= static_cast<uint8_t>(1u << (2 * c + h));
              val(r, g * group + k) = s * q + m;
            } else if (q4) {
              int q = pick(r, g * group + k, static_cast<int>(rng.next() % 16), 0, 15);
              size_t at = data + (k / 8) * 64 + 4 * rr + (k % 4);
              w.bytes[at] |= static_cast<uint8_t>((k % 8) < 4 ? q : q << 4);
              val(r, g * group + k) = s * q + m;
            } else {
              int q = pick(r, g * group + k, static_cast<int>(rng.next() % 255) - 127, -127, 127);
              w.bytes[data + (k / 4) * 64 + 4 * rr + (k % 4)] = static_cast<uint8_t>(static_cast<int8_t>(q));
              val(r, g * group + k) = s * q;
            }
          }
        }
      break;
    }
    default:  // GGUF types the kernels only dequantize (tests/formats builds those)
      throw std::invalid_argument("build_weight: no encoder for " + std::string(dtype_name(type)));
  }
  w.view.name = "test";
  w.view.type = type;
  w.view.shape = {rows, cols};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  w.view.group = (type == DType::PQ4 || type == DType::PQ5 || type == DType::PQ8) ? group : 0;
  return w;
}

// Activation rows of several kinds, by token t % kinds: symmetric; mostly
// positive (a large, coherent sum(x), so zero-point and min corrections
// dominate); block magnitudes spread over 2^-6..2^6 (scales of very
// different sizes); with kinds = 4, also constant magnitude (every code
// +-127).
inline std::vector<float> varied_activations(int n, int64_t cols, uint64_t seed, int kinds = 3) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n) * cols);
  for (int t = 0; t < n; ++t)
    for (int64_t k = 0; k < cols; ++k) {
      float v;
      switch (t % kinds) {
        case 0: v = rng.uniform(-2.0f, 2.0f); break;
        case 1: v = rng.uniform(-0.5f, 3.0f); break;
        case 2: v = std::ldexp(rng.uniform(-1.0f, 1.0f), static_cast<int>((k / 32 * 5 + t) % 13) - 6); break;
        default: v = (k % 3 ? 0.75f : -0.75f); break;
      }
      x[static_cast<size_t>(t) * cols + k] = v;
    }
  return x;
}

// Y = X * W^T in double from the encoded values.
inline std::vector<double> reference_matmul(const std::vector<float>& w, int64_t rows, int64_t cols,
                                            const std::vector<float>& x, int n) {
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(w[r * cols + k]) * x[t * cols + k];
      y[t * rows + r] = acc;
    }
  return y;
}

}  // namespace pocket::test
