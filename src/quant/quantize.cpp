#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <system_error>
#include <thread>

#include "core/tensor.h"
#include "core/pq_format.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket {

namespace {

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

int8_t q8(float x, float inv) { return static_cast<int8_t>(std::clamp(std::nearbyint(x * inv), -127.0f, 127.0f)); }

float amax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

void quantize_q8_0(const float* x, int64_t cols, uint8_t* out) {
  for (int64_t b = 0; b < cols / 32; ++b, out += 34, x += 32) {
    uint16_t dh = f32_to_f16(amax(x, 32) / 127.0f);
    float d = f16_to_f32(dh), inv = d > 0 ? 1.0f / d : 0.0f;
    put_u16(out, dh);
    for (int j = 0; j < 32; ++j) out[2 + j] = static_cast<uint8_t>(q8(x[j], inv));
  }
}

// GGUF's reference rule: the value of largest magnitude maps to code -8.
void quantize_q4_0(const float* x, int64_t cols, uint8_t* out) {
  for (int64_t b = 0; b < cols / 32; ++b, out += 18, x += 32) {
    float mx = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > std::fabs(mx)) mx = x[j];
    uint16_t dh = f32_to_f16(mx / -8.0f);
    float d = f16_to_f32(dh), inv = d != 0 ? 1.0f / d : 0.0f;
    put_u16(out, dh);
    for (int j = 0; j < 16; ++j) {
      auto code = [&](float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v * inv) + 8.0f, 0.0f, 15.0f)); };
      out[2 + j] = static_cast<uint8_t>(code(x[j]) | code(x[j + 16]) << 4);
    }
  }
}

// One row into its slot of the tile layout (core/pq_format.h).
void quantize_pq_row(DType type, const float* x, int64_t cols, int g, int64_t row, uint8_t* base) {
  const int64_t r = row % pq::kTileRows;
  uint8_t* tile = base + (row / pq::kTileRows) * pq::tile_bytes(type, cols, g);
  for (int64_t gi = 0; gi < pq::groups_per_row(cols, g); ++gi) {
    uint8_t* blk = tile + gi * pq::group_block_bytes(type, g);
    uint8_t* data = blk + pq::header_bytes(type);
    const float* xg = x + gi * g;
    const int n = static_cast<int>(std::min<int64_t>(g, cols - gi * g));  // tail group: padding keeps code 0
    if (type != DType::PQ8) {
      const int qmax = type == DType::PQ5 ? 31 : 15;
      quant::Pq4Params p = quant::fit_pq4_group(xg, n, qmax);
      put_u16(blk + 2 * r, f32_to_f16(p.s));
      put_u16(blk + 32 + 2 * r, f32_to_f16(p.m));
      uint8_t q[128];
      quant::pq4_codes(xg, n, p, q, qmax);
      for (int k = 0; k < n; ++k) pq::put_code(type, data, static_cast<int>(r), k, q[k]);
    } else {
      uint16_t sh = f32_to_f16(amax(xg, n) / 127.0f);
      float s = f16_to_f32(sh), inv = s > 0 ? 1.0f / s : 0.0f;
      put_u16(blk + 2 * r, sh);
      for (int k = 0; k < n; ++k) data[(k / 4) * 64 + 4 * r + (k % 4)] = static_cast<uint8_t>(q8(xg[k], inv));
    }
  }
}

}  // namespace

std::vector<uint8_t> quantize(const float* w, int64_t rows, int64_t cols, DType type, int group) {
  if (rows <= 0 || cols <= 0) fail("quantize: shape [", rows, ", ", cols, "] is not positive");
  switch (type) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::PQ4:
    case DType::PQ5: case DType::PQ8:
      break;
    default:  // GGUF types Pocket reads but does not write (K-quants, Q4_1, Q5_x)
      fail("quantize: cannot write ", dtype_name(type), " (writable: f32, f16, bf16, q8_0, q4_0, pq4, pq5, pq8)");
  }
  const bool pq = is_pq(type);
  if (pq && !pq::valid_group(group)) fail("quantize: ", dtype_name(type), " group size ", group, " is not 32, 64 or 128");
  for (int64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(w[i])) fail("quantize: weight [", i / cols, ", ", i % cols, "] is not finite");
  if (type != DType::F32 && type != DType::BF16) {  // fp16 values or scales must not overflow
    for (int64_t i = 0; i < rows * cols; ++i)
      if (std::fabs(w[i]) > 65000.0f) fail("quantize: weight [", i / cols, ", ", i % cols, "] exceeds the fp16 range");
  }
  uint64_t nbytes = tensor_nbytes(type, {rows, cols}, pq ? group : 0, "quantize");
  std::vector<uint8_t> out(nbytes, 0);
  const uint64_t row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(cols), pq ? group : 0);
  auto quantize_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = w + r * cols;
      uint8_t* dst = out.data() + r * row_bytes;  // plain and GGUF types: rows back to back
      switch (type) {
        case DType::F32:
          std::memcpy(dst, x, static_cast<size_t>(cols) * 4);
          break;
        case DType::F16:
        case DType::BF16:
          for (int64_t k = 0; k < cols; ++k) put_u16(dst + 2 * k, type == DType::F16 ? f32_to_f16(x[k]) : f32_to_bf16(x[k]));
          break;
        case DType::Q8_0:
          quantize_q8_0(x, cols, dst);
          break;
        case DType::Q4_0:
          quantize_q4_0(x, cols, dst);
          break;
        case DType::PQ4:
        case DType::PQ5:
        case DType::PQ8:
          quantize_pq_row(type, x, cols, group, r, out.data());
          break;
        default:
          break;  // rejected above
      }
    }
  };
  // Threads take whole 16-row tiles (PQ rows of a tile share bytes); only
  // the PQ4 / PQ5 fit costs enough to pay for starting threads.
  const int64_t tiles = (rows + pq::kTileRows - 1) / pq::kTileRows;
  const int64_t threads = (type == DType::PQ4 || type == DType::PQ5) && rows * cols >= (int64_t{1} << 16)
                              ? std::min<int64_t>(tiles, std::max(1u, std::thread::hardware_concurrency()))
                              : 1;
  auto bound = [&](int64_t t) { return std::min(rows, tiles * t / threads * pq::kTileRows); };
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(quantize_rows, bound(t), bound(t + 1));
    } catch (const std::system_error&) {  // no thread available: do it here
      quantize_rows(bound(t), bound(t + 1));
    }
  }
  quantize_rows(0, bound(1));
  for (auto& th : workers) th.join();
  return out;
}

}  // namespace pocket
