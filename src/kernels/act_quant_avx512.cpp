// AVX-512 activation quantization (act_quant.h, loop in act_quant_simd.h):
// a block of 32 is two zmm registers. The portable code runs SSE2 on every
// x86 level; on AVX-512 it was 3% of a 512-token prefill (Zen 4).
#include <immintrin.h>

#include "kernels/act_quant_simd.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

struct ActQuantAvx512 {
  // max(a, m) keeps m where a is NaN (vmaxps returns its second operand),
  // as the portable std::max(m, a); no lane is NaN afterwards, so the
  // reduction's order is free.
  static __m512 abs_max(__m512 v, __m512 m) {
    return _mm512_max_ps(_mm512_and_ps(v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff))), m);
  }
  static float amax32(const float* x) {
    return _mm512_reduce_max_ps(abs_max(_mm512_loadu_ps(x + 16), abs_max(_mm512_loadu_ps(x), _mm512_setzero_ps())));
  }
  // quant1 of act_quant.cpp on 16 values: vmaxps(t, -127) gives -127 for a
  // NaN t, then vminps clamps above; the result is an integer, so the
  // truncating conversion is exact.
  static __m512i quant16(__m512 v, __m512 inv) {
    const __m512 t =
        _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    const __m512 magic = _mm512_set1_ps(kActRoundMagic);
    return _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_add_ps(t, magic), magic));
  }
  static int quant32(const float* x, float inv, int8_t* q) {
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i c0 = quant16(_mm512_loadu_ps(x), vinv), c1 = quant16(_mm512_loadu_ps(x + 16), vinv);
    // |code| <= 127: the truncating narrowings are exact.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(c0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(c1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
  }
};

}  // namespace

void install_avx512_act_quant(KernelTable& t) { t.quantize_act_rows = quantize_act_rows_simd<ActQuantAvx512>; }

}  // namespace pocket::kernels
