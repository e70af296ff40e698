// AVX-512 activation quantization (act_quant.h) for the PQ and Q4_0/Q8_0
// kernels' blocks of 32 with one scale each: a block is two zmm registers,
// so its maximum, codes and sums take a few instructions instead of the
// portable code's eight SSE passes (that code was 3% of a 512-token
// prefill on Zen 4). The partial and padding blocks at a row's end, and
// the K-quants' shared scales, go to the portable code. The result is bit
// for bit the portable one: per value the same operations in the same
// order (|x|, a maximum that skips NaN, x * (1 / d), the clamp that turns
// NaN into -127, rounding by adding and subtracting 1.5 * 2^23), maxima
// and integer sums that do not depend on order.
#include <immintrin.h>

#include "kernels/act_quant.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

// Adding and subtracting 1.5 * 2^23 rounds |v| < 2^22 to the nearest
// integer, ties to even (act_quant.cpp).
constexpr float kRoundMagic = 12582912.0f;

// max(a, m) keeps m where a is NaN (vmaxps returns its second operand),
// as the portable std::max(m, a).
inline __m512 abs_max(__m512 v, __m512 m) {
  return _mm512_max_ps(_mm512_and_ps(v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff))), m);
}

// quant1 of act_quant.cpp on 16 values: vmaxps(t, -127) gives -127 for a
// NaN t, then vminps clamps above; the result is an integer, so the
// truncating conversion is exact.
inline __m512i quant16(__m512 v, __m512 inv) {
  const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  const __m512 magic = _mm512_set1_ps(kRoundMagic);
  return _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_add_ps(t, magic), magic));
}

void quantize_act_rows_avx512(const float* x, int t0, int t1, int64_t cols, ActBlocks& a) {
  if (a.scale_block != kActBlock) {
    quantize_act_rows(x, t0, t1, cols, a);
    return;
  }
  const int64_t full = cols / kActBlock;  // blocks of 32 real values
  for (int t = t0; t < t1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * cols;
    int8_t* q = a.q.data() + static_cast<int64_t>(t) * a.kpad;
    float* d_out = a.d.data() + static_cast<int64_t>(t) * a.nb;
    float* s_out = a.s.data() + static_cast<int64_t>(t) * a.nb;
    for (int64_t b = 0; b < full; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + b * kActBlock), v1 = _mm512_loadu_ps(xr + b * kActBlock + 16);
      // No lane is NaN after abs_max, so the reduction's order is free.
      const float amax = _mm512_reduce_max_ps(abs_max(v1, abs_max(v0, _mm512_setzero_ps())));
      const float d = amax / 127.0f;
      const __m512 inv = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
      const __m512i c0 = quant16(v0, inv), c1 = quant16(v1, inv);
      // |code| <= 127: the truncating narrowings are exact.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kActBlock), _mm512_cvtepi32_epi8(c0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kActBlock + 16), _mm512_cvtepi32_epi8(c1));
      d_out[b] = d;
      s_out[b] = d * static_cast<float>(_mm512_reduce_add_epi32(c0) + _mm512_reduce_add_epi32(c1));
    }
    quantize_act_row_blocks(xr, t, full, cols, a);
  }
}

}  // namespace

void install_avx512_act_quant(KernelTable& t) { t.quantize_act_rows = quantize_act_rows_avx512; }

}  // namespace pocket::kernels
