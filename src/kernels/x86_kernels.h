// Matmul kernels for x86, written once against the vector traits of
// x86_vec.h and instantiated in kernels_avx2.cpp / kernels_avx512.cpp; the
// PQ kernels come from tiled_kernels.h. Unnamed namespace for the same
// reason as x86_vec.h.
#pragma once
#include <algorithm>

#include "kernels/table.h"
#include "kernels/tiled_kernels.h"
#include "kernels/x86_vec.h"

namespace pocket::kernels {
namespace {

// ---- Q4_0 / Q8_0: GGUF row-major blocks, used in place ------------------
// value = d * (u - Bias) with u unsigned for Q4_0 (nibble, Bias 8); for
// Q8_0 the traits' dot8_s8s8 decides the bias (see V::kS8Bias).
template <class V, bool Q4, int T>
void gguf_row(const MatmulJob& job, int64_t r, int t0) {
  const int64_t cols = job.cols, rows = job.rows, nb = cols / 32;
  const int bb = Q4 ? 18 : 34;
  const float bias = Q4 ? 8.0f : static_cast<float>(V::kS8Bias);
  const uint8_t* row = job.w + r * nb * bb;
  const ActBlocks& a = *job.xq;
  __m256 acc[T];
  float corr[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    const float d = half_to_float(blk);
    __m256i wv;
    if constexpr (Q4) {
      __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      __m128i lo = _mm_and_si128(q, _mm_set1_epi8(0x0f));
      __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0f));
      wv = _mm256_set_m128i(hi, lo);
    } else {
      wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    }
    for (int t = 0; t < T; ++t) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.row(t0 + t) + b * 32));
      const __m256i dot = Q4 ? V::dot8_u8s8(wv, x) : V::dot8_s8s8(wv, x);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * a.scales(t0 + t)[b]), acc[t]);
      corr[t] += d * a.sums(t0 + t)[b];
    }
  }
  for (int t = 0; t < T; ++t) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[t]), _mm256_extractf128_ps(acc[t], 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    job.y[static_cast<int64_t>(t0 + t) * rows + r] = _mm_cvtss_f32(h) - bias * corr[t];
  }
}

template <class V, bool Q4>
void matmul_gguf(const MatmulJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for_token_tiles(job.n, [&]<int T>(int t0) { gguf_row<V, Q4, T>(job, r, t0); });
}

// ---- F32 / F16 / BF16: float dots, 16 columns per step ------------------
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
      float wj = D == DType::F32 ? reinterpret_cast<const float*>(row)[j]
                 : D == DType::F16 ? half_to_float(row + 2 * j)
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
void install_x86_matmul(KernelTable& t) {
  auto set = [&](DType d, MatmulFn fn, bool int8, int64_t align) { t.matmul[static_cast<int>(d)] = {fn, int8, align}; };
  set(DType::F32, matmul_float<V, DType::F32>, false, 1);
  set(DType::F16, matmul_float<V, DType::F16>, false, 1);
  set(DType::BF16, matmul_float<V, DType::BF16>, false, 1);
  set(DType::Q8_0, matmul_gguf<V, false>, true, 1);
  set(DType::Q4_0, matmul_gguf<V, true>, true, 1);
  set(DType::PQ4, matmul_pq<V, true>, true, pq::kTileRows);
  set(DType::PQ8, matmul_pq<V, false>, true, pq::kTileRows);
}

}  // namespace
}  // namespace pocket::kernels
