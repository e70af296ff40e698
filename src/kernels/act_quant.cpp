#include "kernels/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "util/error.h"

namespace pocket::kernels {

namespace {

// Clamps to [-127, 127] first (NaN becomes -127, so the conversion is
// always defined), then rounds; the bounds are integers, so the order does
// not change the result.
inline float quant1(float v, float inv) {
  float t = v * inv;
  t = t > -127.0f ? t : -127.0f;
  t = t < 127.0f ? t : 127.0f;
  return (t + kActRoundMagic) - kActRoundMagic;
}

#if defined(__SSE2__)
// Baseline x86-64 (the same code on every level). GCC turns neither the
// clamps of quant1 on vectors into maxps/minps (it keeps compare-and-select
// for NaN) nor an int32 -> int8 vector conversion into packs (it assembled
// the bytes in general registers): 1.5-1.8 ns a value before. maxps(t, c)
// is t > c ? t : c with NaN giving c, minps(t, c) t < c ? t : c: quant1's
// clamps exactly.

// 16 values quantized into q (quant1 on each); returns the codes' sum.
inline int quant16(const float* x, float inv, int8_t* q) {
  const __m128 vinv = _mm_set1_ps(inv), lo = _mm_set1_ps(-127.0f), hi = _mm_set1_ps(127.0f);
  const __m128 magic = _mm_set1_ps(kActRoundMagic);
  __m128i c[4];
  for (int i = 0; i < 4; ++i) {
    __m128 t = _mm_min_ps(_mm_max_ps(_mm_mul_ps(_mm_loadu_ps(x + 4 * i), vinv), lo), hi);
    c[i] = _mm_cvttps_epi32(_mm_sub_ps(_mm_add_ps(t, magic), magic));  // an integer already: exact
  }
  // |c| <= 127: the saturating packs are exact.
  const __m128i bytes = _mm_packs_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), bytes);
  __m128i sum = _mm_add_epi32(_mm_add_epi32(c[0], c[1]), _mm_add_epi32(c[2], c[3]));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
  return _mm_cvtsi128_si32(sum);
}

// max |x| over n values (a multiple of 4); NaN never wins, as in
// std::max(m, a): maxps(a, m) keeps m when a is NaN. Four independent
// maxima (one chain of maxps latencies was a cycle per value); max is exact
// in any order.
float amax_full(const float* x, int64_t n) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  auto abs4 = [&](int64_t j) { return _mm_and_ps(_mm_loadu_ps(x + j), abs_mask); };
  __m128 m0 = _mm_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    m0 = _mm_max_ps(abs4(j), m0);
    m1 = _mm_max_ps(abs4(j + 4), m1);
    m2 = _mm_max_ps(abs4(j + 8), m2);
    m3 = _mm_max_ps(abs4(j + 12), m3);
  }
  for (; j < n; j += 4) m0 = _mm_max_ps(abs4(j), m0);
  const __m128 m = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));
  alignas(16) float l[4];
  _mm_store_ps(l, m);
  return std::max(std::max(l[0], l[1]), std::max(l[2], l[3]));
}
#else
// Four floats in a GCC/Clang vector (NEON on aarch64). The scalar loop does
// not vectorise (float max is not associative once NaN is considered).
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline F4 quant4(F4 v, float inv) {
  F4 t = v * inv;
  t = t > -127.0f ? t : F4{} - 127.0f;
  t = t < 127.0f ? t : F4{} + 127.0f;
  return (t + kActRoundMagic) - kActRoundMagic;
}

inline int quant16(const float* x, float inv, int8_t* q) {
  I4 sum{};
  for (int j = 0; j < 16; j += 4) {
    const I4 c = __builtin_convertvector(quant4(load4(x + j), inv), I4);
    sum += c;
    for (int l = 0; l < 4; ++l) q[j + l] = static_cast<int8_t>(c[l]);
  }
  return sum[0] + sum[1] + sum[2] + sum[3];
}

float amax_full(const float* x, int64_t n) {
  F4 m{};
  for (int64_t j = 0; j < n; j += 4) {
    I4 bits;
    std::memcpy(&bits, x + j, sizeof bits);
    bits &= 0x7fffffff;  // |x|
    F4 a;
    std::memcpy(&a, &bits, sizeof a);
    m = a > m ? a : m;  // NaN never wins, as in std::max(m, a)
  }
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}
#endif

float amax_partial(const float* x, int64_t valid) {
  float amax = 0.0f;
  for (int64_t k = 0; k < valid; ++k) amax = std::max(amax, std::fabs(x[k]));
  return amax;
}

struct HalfSums {
  int lo, hi;  // sums of the codes of columns 0-15 and 16-31
};

// One block of 32 values of which `valid` are real (the rest is padding,
// code 0), quantized with scale d; returns the sums of its codes.
HalfSums quantize_block(const float* x, int64_t valid, float d, int8_t* q) {
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  if (valid == kActBlock) {
    const int lo = quant16(x, inv, q);
    return {lo, quant16(x + 16, inv, q + 16)};
  }
  HalfSums sums{0, 0};
  for (int k = 0; k < kActBlock; ++k) {
    int v = k < valid ? static_cast<int>(quant1(x[k], inv)) : 0;
    q[k] = static_cast<int8_t>(v);
    (k < 16 ? sums.lo : sums.hi) += v;
  }
  return sums;
}

}  // namespace

void prepare_acts(int n, int64_t kpad, ActBlocks& a, int scale_block) {
  a.n = n;
  a.kpad = kpad;
  a.nb = kpad / kActBlock;
  if ((scale_block != kActBlock && scale_block != 8 * kActBlock) || kpad % scale_block != 0)
    fail("quantize_acts: scale block ", scale_block, " for rows padded to ", kpad);
  a.scale_block = scale_block;
  a.q.resize(static_cast<size_t>(n) * kpad);  // keeps capacity across calls
  a.d.resize(static_cast<size_t>(n) * a.nb);
  a.s.resize(static_cast<size_t>(n) * a.nb);
  a.h.resize(scale_block == kActBlock ? 0 : static_cast<size_t>(n) * a.nb * 2);
}

void quantize_act_row_blocks(const float* xr, int t, int64_t b_begin, int64_t cols, ActBlocks& a) {
  const int64_t scale_block = a.scale_block;
  const int64_t per_scale = scale_block / kActBlock;  // blocks sharing one d
  int8_t* q = a.q.data() + static_cast<int64_t>(t) * a.kpad;
  for (int64_t b0 = b_begin; b0 < a.nb; b0 += per_scale) {
    const int64_t k0 = b0 * kActBlock;
    const int64_t valid = std::clamp<int64_t>(cols - k0, 0, scale_block);
    const float amax = valid == scale_block ? amax_full(xr + k0, valid) : amax_partial(xr + k0, valid);
    const float d = amax / 127.0f;
    for (int64_t b = b0; b < b0 + per_scale; ++b) {
      const int64_t kb = b * kActBlock;
      const HalfSums sums = quantize_block(xr + kb, std::clamp<int64_t>(cols - kb, 0, kActBlock), d, q + kb);
      a.d[t * a.nb + b] = d;
      a.s[t * a.nb + b] = d * static_cast<float>(sums.lo + sums.hi);
      if (!a.h.empty()) {  // |sum| <= 16 * 127: fits int16
        a.h[2 * (t * a.nb + b)] = static_cast<int16_t>(sums.lo);
        a.h[2 * (t * a.nb + b) + 1] = static_cast<int16_t>(sums.hi);
      }
    }
  }
}

void quantize_act_rows(const float* x, int t0, int t1, int64_t cols, ActBlocks& a) {
  for (int t = t0; t < t1; ++t) quantize_act_row_blocks(x + static_cast<int64_t>(t) * cols, t, 0, cols, a);
}

void quantize_acts(const float* x, int n, int64_t cols, int64_t kpad, ActBlocks& a, int scale_block) {
  prepare_acts(n, kpad, a, scale_block);
  quantize_act_rows(x, 0, n, cols, a);
}

}  // namespace pocket::kernels
