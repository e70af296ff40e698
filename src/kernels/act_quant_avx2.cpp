// AVX2 activation quantization (act_quant.h, loop in act_quant_simd.h): a
// block of 32 is four ymm registers, against the portable code's eight SSE
// passes (2.8% of a 512-token prefill at the AVX2 level, Zen 4).
#include <immintrin.h>

#include "kernels/act_quant_simd.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

struct ActQuantAvx2 {
  // max(a, m) keeps m where a is NaN (vmaxps returns its second operand),
  // as the portable std::max(m, a); no lane is NaN afterwards, so the
  // reduction's order is free.
  static __m256 abs_max(const float* x, __m256 m) {
    return _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))), m);
  }
  static float amax32(const float* x) {
    const __m256 m = abs_max(x + 24, abs_max(x + 16, abs_max(x + 8, abs_max(x, _mm256_setzero_ps()))));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  // quant1 of act_quant.cpp on 8 values: vmaxps(t, -127) gives -127 for a
  // NaN t, then vminps clamps above; the result is an integer, so the
  // truncating conversion is exact.
  static __m256i quant8(const float* x, __m256 inv) {
    const __m256 t =
        _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x), inv), _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    const __m256 magic = _mm256_set1_ps(kActRoundMagic);
    return _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, magic), magic));
  }
  static int quant32(const float* x, float inv, int8_t* q) {
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i c0 = quant8(x, vinv), c1 = quant8(x + 8, vinv), c2 = quant8(x + 16, vinv), c3 = quant8(x + 24, vinv);
    // |code| <= 127: the saturating packs are exact. They interleave the
    // 128-bit lanes: dword k of the result holds codes 4k..4k+3 of
    // (c0 lo, c1 lo, c2 lo, c3 lo, c0 hi, c1 hi, c2 hi, c3 hi); put them back.
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
  }
};

}  // namespace

void install_avx2_act_quant(KernelTable& t) { t.quantize_act_rows = quantize_act_rows_simd<ActQuantAvx2>; }

}  // namespace pocket::kernels
