// Float helpers shared by the x86 element-wise and attention kernels
// (AVX2 + FMA; the AVX-512 translation units include them too). Unnamed
// namespace: each translation unit keeps its own copy, compiled with its own
// ISA flags (see x86_vec.h).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace pocket::kernels {
namespace {

// Stores the first `valid` (1..4) lanes of r at dst: four attention scores
// at a time, the last step of a block possibly short.
inline void store_lanes(float* dst, __m128 r, int valid) {
  if (valid == 4) {
    _mm_storeu_ps(dst, r);
  } else {
    alignas(16) float tmp[4];
    _mm_store_ps(tmp, r);
    for (int i = 0; i < valid; ++i) dst[i] = tmp[i];
  }
}

inline float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

inline float hmax8(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// exp(x): 2^n * p(r) with x = n ln2 + r, |r| <= ln2/2; degree-6 polynomial,
// ~2 ulp relative error on [-87, 88]; below that it flushes to 0.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f);
  __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 v = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, v);
}

inline void softmax_avx2(float* x, int n) {
  if (n <= 0) return;
  int i = 0;
  // Four maxima in flight (a max is exact in any order: the same bits).
  __m256 vmax = _mm256_set1_ps(-INFINITY), m1 = vmax, m2 = vmax, m3 = vmax;
  for (; i + 32 <= n; i += 32) {
    vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
  }
  vmax = _mm256_max_ps(_mm256_max_ps(vmax, m1), _mm256_max_ps(m2, m3));
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float mx = hmax8(vmax);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum8(vsum);
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const __m256 vinv = _mm256_set1_ps(1.0f / sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

}  // namespace
}  // namespace pocket::kernels
