// AVX-512 inner loops of the multi-query attention (driver:
// attention_impl.h). 32 zmm registers hold a whole 128-wide V row for two
// queries (16 accumulators + 8 converted V vectors), so V is read in one
// pass instead of four 32-column passes, and each instruction converts or
// multiplies 16 values.
#include <immintrin.h>

#include "kernels/attention_impl.h"
#include "kernels/table.h"
#include "kernels/x86_math.h"

namespace pocket::kernels {

namespace {

inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 16 int8 values of a q8 row, widened to float (the row scale is applied
// by the driver). Float products rather than VNNI: q would have to be
// quantized too, adding error, and the loop waits on memory, not on math.
inline __m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// 16 elements of a q4 row (one nibble side of 16 bytes), as code - 8: the
// nibble indexes a 16-float table (vpermps reads only an index's low 4
// bits, so the low side needs no mask): 2-3 instructions per 16 values
// instead of widen, shift, mask, offset and convert.
inline __m512 load16(Q4Ptr p) {
  const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.bytes())));
  if (p.high()) c = _mm512_srli_epi32(c, 4);
  return _mm512_permutexvar_ps(c, table);
}

struct AttentionOpsAvx512 {
  static constexpr int kLanes = 16;
  static void softmax(float* x, int n) { softmax_avx2(x, n); }

  // As the AVX2 version: four positions per step, then one reduction tree
  // (512 -> 256 bits, then hadd) turns 4 accumulators into 4 scores; a
  // short last step repeats its last row, so every score takes the same
  // path (batch invariance, see AttentionOpsAvx2::scores).
  template <int NQ, class P>
  static void scores(const float* const* q, P k, int n_t, int hd, float scale, float* const* s, int t0) {
    const __m128 vscale = _mm_set1_ps(scale);
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      __m512 acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = _mm512_setzero_ps();
      P kt = k + static_cast<size_t>(t) * hd;
      P rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      // See kAttnPrefetchRows.
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 16) {
        __m512 qd[NQ];
        for (int j = 0; j < NQ; ++j) qd[j] = _mm512_loadu_ps(q[j] + d);
        for (int p = 0; p < 4; ++p) {
          const __m512 kv = load16(rows[p] + d);
          for (int j = 0; j < NQ; ++j) acc[j][p] = _mm512_fmadd_ps(qd[j], kv, acc[j][p]);
        }
      }
      for (int j = 0; j < NQ; ++j) {
        __m256 h[4];
        for (int p = 0; p < 4; ++p)
          h[p] = _mm256_add_ps(_mm512_castps512_ps256(acc[j][p]),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j][p]), 1)));
        const __m256 r8 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
        const __m128 r = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1)), vscale);
        store_lanes(s[j] + t0 + t, r, valid);
      }
    }
  }

  // Up to 128 columns per pass (8 vectors per query).
  template <int NQ, class P>
  static void values(const float* const* p, P v, int n_t, int hd, float* const* out, int t0, bool first) {
    for (int d = 0; d < hd; d += 128) {
      const int w = std::min(128, hd - d) / 16;
      if (w == 8) {
        pass<NQ, 8>(p, v, n_t, hd, out, t0, first, d);
      } else {
        for (int i = 0; i < w; ++i) pass<NQ, 1>(p, v, n_t, hd, out, t0, first, d + 16 * i);
      }
    }
  }

  template <int NQ, int W, class P>
  static void pass(const float* const* p, P v, int n_t, int hd, float* const* out, int t0, bool first,
                   int d) {
    __m512 acc[NQ][W];
    for (int j = 0; j < NQ; ++j)
      for (int i = 0; i < W; ++i) acc[j][i] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out[j] + d + 16 * i);
    for (int t = 0; t < n_t; ++t) {
      P vt = v + static_cast<size_t>(t) * hd + d;
      if (d == 0) prefetch_row(vt + kAttnPrefetchRows * hd, hd);
      __m512 vv[W];
      for (int i = 0; i < W; ++i) vv[i] = load16(vt + 16 * i);
      for (int j = 0; j < NQ; ++j) {
        const __m512 pj = _mm512_set1_ps(p[j][t0 + t]);
        for (int i = 0; i < W; ++i) acc[j][i] = _mm512_fmadd_ps(pj, vv[i], acc[j][i]);
      }
    }
    for (int j = 0; j < NQ; ++j)
      for (int i = 0; i < W; ++i) _mm512_storeu_ps(out[j] + d + 16 * i, acc[j][i]);
  }
};

void attention_heads_avx512(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int hd, float scale,
                            float* scratch) {
  // head_dim not a multiple of 16 (e.g. 8, 24): the AVX2 loops handle it.
  if (hd % AttentionOpsAvx512::kLanes != 0) {
    kernel_table(Isa::Avx2).attention_heads(qs, k, v, hd, scale, scratch);
    return;
  }
  attention_heads_blocked<AttentionOpsAvx512>(qs, k, nullptr, v, nullptr, hd, scale, scratch);
}

void attention_heads_q8_avx512(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int hd, float scale, float* scratch) {
  if (hd % AttentionOpsAvx512::kLanes != 0) {
    kernel_table(Isa::Avx2).attention_heads_q8(qs, k, v, hd, scale, scratch);
    return;
  }
  attention_heads_blocked<AttentionOpsAvx512>(qs, k.q, k.scale, v.q, v.scale, hd, scale, scratch);
}

void attention_heads_q4_avx512(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int hd, float scale, float* scratch) {
  attention_heads_blocked<AttentionOpsAvx512>(qs, Q4Ptr{k.q, 0}, k.scale, Q4Ptr{v.q, 0}, v.scale, hd, scale, scratch);
}

}  // namespace

void install_avx512_attention(KernelTable& t) {
  t.attention_heads = attention_heads_avx512;
  t.attention_heads_q8 = attention_heads_q8_avx512;
  t.attention_heads_q4 = attention_heads_q4_avx512;
}

}  // namespace pocket::kernels
