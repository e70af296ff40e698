// Matmul kernels for float weights (F32, F16, BF16), written once against
// the 16-lane vector traits (x86_vec.h: Avx2, Avx512; arm_vec.h: NeonFloat)
// and instantiated by each level: 16 columns per step, the weight chunk
// loaded and widened once per token tile. Traits interface: F, zero_f,
// load_f32, load_f16, load_bf16, fma(a, b, c) = a * b + c, hsum, and the
// scalar half(p) for the tail columns. Unnamed namespace: see
// x86_vec.h.
#pragma once
#include <cstring>

#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {
namespace {

inline float bf16_to_float(const uint8_t* p) {
  const uint32_t bits = static_cast<uint32_t>(p[0] | p[1] << 8) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class V, DType D>
typename V::F load_w(const uint8_t* row, int64_t k) {
  if constexpr (D == DType::F32) return V::load_f32(reinterpret_cast<const float*>(row) + k);
  if constexpr (D == DType::F16) return V::load_f16(row + 2 * k);
  return V::load_bf16(row + 2 * k);
}

template <class V, DType D, int T>
void float_row(const MatmulJob& job, int64_t r, int t0) {
  const int64_t cols = job.cols, rows = job.rows;
  const int esz = D == DType::F32 ? 4 : 2;
  const uint8_t* row = job.w + r * cols * esz;
  typename V::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = V::zero_f();
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    typename V::F wv = load_w<V, D>(row, k);
    for (int t = 0; t < T; ++t) acc[t] = V::fma(wv, V::load_f32(job.x + (t0 + t) * cols + k), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = V::hsum(acc[t]);
    for (int64_t j = k; j < cols; ++j) {  // tail columns
      float wj = D == DType::F32   ? reinterpret_cast<const float*>(row)[j]
                 : D == DType::F16 ? V::half(row + 2 * j)
                                   : bf16_to_float(row + 2 * j);
      s += wj * job.x[(t0 + t) * cols + j];
    }
    job.y[static_cast<int64_t>(t0 + t) * rows + r] = s;
  }
}

template <class V, DType D>
void matmul_float(const MatmulJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for_token_tiles(job.n, [&]<int T>(int t0) { float_row<V, D, T>(job, r, t0); });
}

template <class V>
void install_float_matmul(KernelTable& t) {
  t.matmul[static_cast<int>(DType::F32)] = {matmul_float<V, DType::F32>, false, 1};
  t.matmul[static_cast<int>(DType::F16)] = {matmul_float<V, DType::F16>, false, 1};
  t.matmul[static_cast<int>(DType::BF16)] = {matmul_float<V, DType::BF16>, false, 1};
}

}  // namespace
}  // namespace pocket::kernels
