// Test-side encoder for llama.cpp's GGUF block types Q4_1, Q5_0, Q5_1 and
// the K-quants (Q2_K..Q8_K): packs the fields of a block (scales, mins,
// codes) into the byte layout, and a simple round-to-nearest quantizer on
// top of it. Written from the format descriptions, independently of the
// library's decoder (src/kernels/dequant_gguf.cpp), so that decoding a
// packed block checks both against the hand-computed value.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "util/half.h"

namespace pocket::test {

// One block's fields in the units the format stores them.
struct KBlock {
  float d = 0;     // block / super-block scale (fp16, Q8_K: f32)
  float dmin = 0;  // super-block scale of the mins (Q2_K, Q4_K, Q5_K); the offset m for Q4_1 / Q5_1
  std::vector<int> scales, mins;  // per sub-block, as stored (Q3_K: 0..63, biased by 32; Q6_K: int8)
  std::vector<int> codes;         // per element, as stored (unsigned, Q8_K: int8)
};

// Elements per sub-block (the whole block for the 32-element types).
inline int sub_block_size(DType t) {
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q6_K:
      return 16;
    case DType::Q4_K:
    case DType::Q5_K:
      return 32;
    default:
      return dtype_block_elems(t);
  }
}

inline double rounded_half(float v) { return f16_to_f32(f32_to_f16(v)); }

// The value element i decodes to, from the format's formula (in double).
inline double kblock_value(DType t, const KBlock& b, int i) {
  const int s = i / sub_block_size(t), q = b.codes[static_cast<size_t>(i)];
  const double d = t == DType::Q8_K ? b.d : rounded_half(b.d), dmin = rounded_half(b.dmin);
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
      return d * q + dmin;
    case DType::Q5_0:
      return d * (q - 16);
    case DType::Q2_K:
    case DType::Q4_K:
    case DType::Q5_K:
      return d * b.scales[s] * q - dmin * b.mins[s];
    case DType::Q3_K:
      return d * (b.scales[s] - 32) * (q - 4);
    case DType::Q6_K:
      return d * b.scales[s] * (q - 32);
    case DType::Q8_K:
      return d * q;
    default:
      return NAN;
  }
}

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// The 2-bit field of element i in Q2_K / Q3_K: each half of 128 elements
// owns 32 bytes; element r of a half sits in byte r % 32 at bit 2 * (r / 32).
inline void put_two_bits(uint8_t* qs, int i, int v) {
  const int half = i / 128, r = i % 128;
  qs[32 * half + r % 32] |= static_cast<uint8_t>((v & 3) << (2 * (r / 32)));
}

// Packs `b` into the block layout of type t.
inline std::vector<uint8_t> pack_block(DType t, const KBlock& b) {
  std::vector<uint8_t> out(static_cast<size_t>(dtype_block_bytes(t)), 0);
  uint8_t* p = out.data();
  const int n = dtype_block_elems(t);
  auto nibbles32 = [&](uint8_t* qs) {  // 32-element types: byte j holds elements j and j + 16
    for (int i = 0; i < 32; ++i) qs[i % 16] |= static_cast<uint8_t>((b.codes[i] & 15) << (i < 16 ? 0 : 4));
  };
  auto fifth_bits32 = [&](uint8_t* qh) {
    uint32_t bits = 0;
    for (int i = 0; i < 32; ++i) bits |= static_cast<uint32_t>((b.codes[i] >> 4) & 1) << i;
    for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
  };
  switch (t) {
    case DType::Q4_1:
      put_half(p, b.d), put_half(p + 2, b.dmin), nibbles32(p + 4);
      break;
    case DType::Q5_0:
      put_half(p, b.d), fifth_bits32(p + 2), nibbles32(p + 6);
      break;
    case DType::Q5_1:
      put_half(p, b.d), put_half(p + 2, b.dmin), fifth_bits32(p + 4), nibbles32(p + 8);
      break;
    case DType::Q2_K:
      for (int s = 0; s < 16; ++s) p[s] = static_cast<uint8_t>(b.scales[s] | b.mins[s] << 4);
      for (int i = 0; i < n; ++i) put_two_bits(p + 16, i, b.codes[i]);
      put_half(p + 80, b.d), put_half(p + 82, b.dmin);
      break;
    case DType::Q3_K:
      for (int i = 0; i < n; ++i) {
        put_two_bits(p + 32, i, b.codes[i]);
        if (b.codes[i] & 4) p[(i % 128) % 32] |= static_cast<uint8_t>(1 << (4 * (i / 128) + (i % 128) / 32));
      }
      for (int s = 0; s < 16; ++s) {  // low nibbles in bytes 0-7, bit pairs in bytes 8-11
        const int lo = b.scales[s] & 15, hi = b.scales[s] >> 4;
        p[96 + s % 8] |= static_cast<uint8_t>(lo << (s < 8 ? 0 : 4));
        p[96 + 8 + s % 4] |= static_cast<uint8_t>(hi << (2 * (s / 4)));
      }
      put_half(p + 108, b.d);
      break;
    case DType::Q4_K:
    case DType::Q5_K: {
      put_half(p, b.d), put_half(p + 2, b.dmin);
      uint8_t* s = p + 4;
      for (int j = 0; j < 8; ++j) {
        const int sc = b.scales[j], m = b.mins[j];
        if (j < 4) {
          s[j] |= static_cast<uint8_t>(sc);
          s[j + 4] |= static_cast<uint8_t>(m);
        } else {  // low 4 bits in bytes 8-11, top 2 bits in the spare bits of bytes 0-7
          s[j + 4] |= static_cast<uint8_t>((sc & 15) | (m & 15) << 4);
          s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
          s[j] |= static_cast<uint8_t>((m >> 4) << 6);
        }
      }
      const bool five = t == DType::Q5_K;
      uint8_t* qs = p + (five ? 48 : 16);
      for (int i = 0; i < n; ++i) {
        const int j = i / 32, l = i % 32;
        qs[32 * (j / 2) + l] |= static_cast<uint8_t>((b.codes[i] & 15) << (4 * (j % 2)));
        if (five) p[16 + l] |= static_cast<uint8_t>(((b.codes[i] >> 4) & 1) << j);
      }
      break;
    }
    case DType::Q6_K:
      for (int i = 0; i < n; ++i) {
        const int half = i / 128, k = (i % 128) / 32, l = i % 32;
        p[64 * half + l + 32 * (k % 2)] |= static_cast<uint8_t>((b.codes[i] & 15) << (4 * (k / 2)));
        p[128 + 32 * half + l] |= static_cast<uint8_t>((b.codes[i] >> 4) << (2 * k));
      }
      for (int s = 0; s < 16; ++s) p[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(b.scales[s]));
      put_half(p + 208, b.d);
      break;
    case DType::Q8_K:
      std::memcpy(p, &b.d, 4);
      for (int i = 0; i < n; ++i) p[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(b.codes[i]));
      for (int g = 0; g < 16; ++g) {  // block sums of 16 (llama.cpp's dot products use them)
        int16_t sum = 0;
        for (int i = 0; i < 16; ++i) sum = static_cast<int16_t>(sum + b.codes[16 * g + i]);
        std::memcpy(p + 260 + 2 * g, &sum, 2);
      }
      break;
    default:
      break;
  }
  return out;
}

// --- a simple round-to-nearest quantizer ------------------------------------

inline int round_clamp(double v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

// Quantizes one block of `dtype_block_elems(t)` floats.
inline KBlock quantize_kblock(DType t, const float* x) {
  const int n = dtype_block_elems(t), sub = sub_block_size(t), ns = n / sub;
  KBlock b;
  b.codes.assign(static_cast<size_t>(n), 0);
  auto amax = [&](int s) {
    double a = 0;
    for (int i = 0; i < sub; ++i) a = std::max(a, std::fabs(static_cast<double>(x[s * sub + i])));
    return a;
  };
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1: {
      const int levels = t == DType::Q4_1 ? 15 : 31;
      const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
      b.d = (hi - lo) / levels;
      b.dmin = lo;
      const double d = rounded_half(b.d), m = rounded_half(b.dmin);
      for (int i = 0; i < n; ++i) b.codes[i] = d > 0 ? round_clamp((x[i] - m) / d, 0, levels) : 0;
      break;
    }
    case DType::Q5_0: {
      b.d = static_cast<float>(amax(0) / 15.0);
      const double d = rounded_half(b.d);
      for (int i = 0; i < n; ++i) b.codes[i] = d > 0 ? round_clamp(x[i] / d, -16, 15) + 16 : 16;
      break;
    }
    case DType::Q8_K: {
      b.d = static_cast<float>(amax(0) / 127.0);
      for (int i = 0; i < n; ++i) b.codes[i] = b.d > 0 ? round_clamp(x[i] / b.d, -127, 127) : 0;
      break;
    }
    case DType::Q3_K:
    case DType::Q6_K: {  // symmetric: signed sub-block scales
      const bool six = t == DType::Q6_K;
      const int qmax = six ? 31 : 3, smax = six ? 127 : 31;
      std::vector<double> s(static_cast<size_t>(ns));
      double top = 0;
      for (int j = 0; j < ns; ++j) top = std::max(top, s[j] = amax(j) / qmax);
      b.d = static_cast<float>(top / smax);
      const double d = rounded_half(b.d);
      b.scales.assign(static_cast<size_t>(ns), six ? 0 : 32);
      for (int j = 0; j < ns; ++j) {
        const int sc = d > 0 ? round_clamp(s[j] / d, six ? -128 : -32, smax) : 0;
        b.scales[j] = six ? sc : sc + 32;
        const double dl = d * sc;
        for (int i = j * sub; i < (j + 1) * sub; ++i)
          b.codes[i] = (dl != 0 ? round_clamp(x[i] / dl, -qmax - 1, qmax) : 0) + qmax + 1;
      }
      break;
    }
    case DType::Q2_K:
    case DType::Q4_K:
    case DType::Q5_K: {  // asymmetric: value = d * sc * q - dmin * m, with m >= 0
      const int levels = t == DType::Q2_K ? 3 : t == DType::Q4_K ? 15 : 31;
      const int smax = t == DType::Q2_K ? 15 : 63;
      std::vector<double> step(static_cast<size_t>(ns)), off(static_cast<size_t>(ns));
      double top_step = 0, top_off = 0;
      for (int j = 0; j < ns; ++j) {
        double lo = 0, hi = 0;
        for (int i = j * sub; i < (j + 1) * sub; ++i) lo = std::min(lo, double{x[i]}), hi = std::max(hi, double{x[i]});
        step[j] = (hi - lo) / levels;
        off[j] = -lo;
        top_step = std::max(top_step, step[j]);
        top_off = std::max(top_off, off[j]);
      }
      b.d = static_cast<float>(top_step / smax);
      b.dmin = static_cast<float>(top_off / smax);
      const double d = rounded_half(b.d), dmin = rounded_half(b.dmin);
      b.scales.assign(static_cast<size_t>(ns), 0);
      b.mins.assign(static_cast<size_t>(ns), 0);
      for (int j = 0; j < ns; ++j) {
        b.scales[j] = d > 0 ? round_clamp(step[j] / d, 0, smax) : 0;
        b.mins[j] = dmin > 0 ? round_clamp(off[j] / dmin, 0, smax) : 0;
        const double dl = d * b.scales[j], ml = dmin * b.mins[j];
        for (int i = j * sub; i < (j + 1) * sub; ++i) b.codes[i] = dl > 0 ? round_clamp((x[i] + ml) / dl, 0, levels) : 0;
      }
      break;
    }
    default:
      break;
  }
  return b;
}

// Quantizes `rows` rows of `cols` floats (cols a multiple of the block size).
inline std::vector<uint8_t> quantize_k(DType t, const float* x, int64_t rows, int64_t cols) {
  const int n = dtype_block_elems(t);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(rows * cols / n * dtype_block_bytes(t)));
  for (int64_t b = 0; b < rows * cols / n; ++b) {
    auto bytes = pack_block(t, quantize_kblock(t, x + b * n));
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

}  // namespace pocket::test
