// AVX-512 inner loops of the multi-query attention (driver:
// attention_impl.h). 32 zmm registers hold a whole 128-wide V row for two
// queries (16 accumulators + 8 converted V vectors), so V is read in one
// pass instead of four 32-column passes, and each instruction converts or
// multiplies 16 values.
#include <immintrin.h>

#include <cstring>

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

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

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

// In place: f[r] lane c becomes f[c] lane r.
inline void transpose16(__m512* f) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(f[i], f[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(f[i], f[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(t[i + h]), b = _mm512_castps_pd(t[i + 2 + h]);
      f[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      f[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  // Now f[4g + m] holds, in its 128-bit lane L, element 4L + m of rows
  // 4g..4g+3: two 128-bit shuffle stages gather the four groups.
  for (int i = 0; i < 8; ++i) {
    const int a = (i / 4) * 8 + i % 4, b = a + 4;
    t[a] = _mm512_shuffle_f32x4(f[a], f[b], 0x88);
    t[b] = _mm512_shuffle_f32x4(f[a], f[b], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    const int a = i, b = i + 8;
    f[a] = _mm512_shuffle_f32x4(t[a], t[b], 0x88);
    f[b] = _mm512_shuffle_f32x4(t[a], t[b], 0xDD);
  }
}

struct AttentionOpsAvx512 {
  static constexpr int kLanes = 16;
  static constexpr int kValueQueries = 4;  // queries per values() call: 16 accumulators of the 32 registers
  static void softmax(float* x, int n) { softmax_avx2(x, n); }
  // Widen K/V blocks once per task (attention_impl.h): every type (fp16
  // too: measured 8.2 -> 7.2 ns per query and position).
  template <class P>
  static constexpr bool kWidenRows = true;
  template <class P>
  static void widen(P p, int n, float* out) {
    for (int i = 0; i < n; i += 16) _mm512_store_ps(out + i, load16(p + i));
  }

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

  // Four queries x four positions per step (HasScoreQuads in
  // attention_impl.h), with the bits of scores() above: each of the 16
  // accumulators sums its lanes as scores() does, and the reduction tree is
  // the same (lane i + lane i + 8, then adjacent pairs, then pairs of
  // those, then the two halves), but done for all 16 at once by whole-
  // register shuffles and adds, 30 shuffles and 15 adds, where scores()
  // spends 11 shuffles for every 4 scores. Accumulator v = 8 (j / 2) +
  // 2 p + j % 2 (query j, position p) makes the result's 128-bit lane j
  // hold query j's four scores.
  // (Not inlined: inside the driver GCC spilled two of its registers. Out
  // of the driver's pragma, GCC 12 repeats its false "may be used
  // uninitialized" on the intrinsics' undefined operands here.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  template <class P>
  __attribute__((noinline)) static void scores_quad(const float* const* q, P k, int n_t, int hd, float scale,
                                                    float* const* s, int t0) {
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      __m512 acc[16];
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
      P kt = k + static_cast<size_t>(t) * hd;
      P rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 16) {
        __m512 kv[4];  // 16 accumulators + 4 keys + 1 query: 21 registers
        for (int p = 0; p < 4; ++p) kv[p] = load16(rows[p] + d);
        for (int j = 0; j < 4; ++j) {
          const __m512 qd = _mm512_loadu_ps(q[j] + d);
          for (int p = 0; p < 4; ++p) {
            __m512& a = acc[8 * (j / 2) + 2 * p + j % 2];
            a = _mm512_fmadd_ps(qd, kv[p], a);
          }
        }
      }
      // Lane i + lane i + 8: registers 2m and 2m + 1 give one register
      // holding both's eight sums (first's in the low half).
      __m512 h[8];
      for (int m = 0; m < 8; ++m)
        h[m] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0xEE));
      // Adjacent pairs, twice (within 128-bit lanes).
      __m512 g[4];
      for (int m = 0; m < 4; ++m)
        g[m] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0x88),
                             _mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0xDD));
      __m512 f[2];
      for (int m = 0; m < 2; ++m)
        f[m] = _mm512_add_ps(_mm512_shuffle_ps(g[2 * m], g[2 * m + 1], 0x88),
                             _mm512_shuffle_ps(g[2 * m], g[2 * m + 1], 0xDD));
      // The two halves: 128-bit lanes 0 + 1 and 2 + 3 of each.
      const __m512 r = _mm512_mul_ps(_mm512_add_ps(_mm512_shuffle_f32x4(f[0], f[1], 0x88),
                                                   _mm512_shuffle_f32x4(f[0], f[1], 0xDD)),
                                     vscale);
      store_lanes(s[0] + t0 + t, _mm512_castps512_ps128(r), valid);
      store_lanes(s[1] + t0 + t, _mm512_extractf32x4_ps(r, 1), valid);
      store_lanes(s[2] + t0 + t, _mm512_extractf32x4_ps(r, 2), valid);
      store_lanes(s[3] + t0 + t, _mm512_extractf32x4_ps(r, 3), valid);
    }
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  // q8 scores with VNNI (see HasQ8Dots in attention_impl.h), four positions
  // per step as scores() above, for head_dim a multiple of 64 (else the
  // float path gives the same integers). vpdpbusd multiplies unsigned by
  // signed bytes: the key codes are flipped to k + 128 (xor 0x80), and
  // 128 * sum(q) comes off the sums, which stay far inside int32.
  template <int NQ>
  static void q8_dots(const int8_t* const* q, const int* q_sum, const int8_t* k, int n_t, int hd, float* const* s,
                      int t0) {
    if (hd % 64 != 0) {
      q8_dots_float<NQ>(q, k, n_t, hd, s, t0);
      return;
    }
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      __m512i acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = _mm512_setzero_si512();
      const int8_t* kt = k + static_cast<size_t>(t) * hd;
      const int8_t* rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 64) {
        __m512i qd[NQ];
        for (int j = 0; j < NQ; ++j) qd[j] = _mm512_loadu_si512(q[j] + d);
        for (int p = 0; p < 4; ++p) {
          const __m512i kv = _mm512_xor_si512(_mm512_loadu_si512(rows[p] + d), flip);
          for (int j = 0; j < NQ; ++j) acc[j][p] = _mm512_dpbusd_epi32(acc[j][p], kv, qd[j]);
        }
      }
      for (int j = 0; j < NQ; ++j) {
        __m256i h[4];
        for (int p = 0; p < 4; ++p)
          h[p] = _mm256_add_epi32(_mm512_castsi512_si256(acc[j][p]), _mm512_extracti64x4_epi64(acc[j][p], 1));
        const __m256i r8 = _mm256_hadd_epi32(_mm256_hadd_epi32(h[0], h[1]), _mm256_hadd_epi32(h[2], h[3]));
        const __m128i r = _mm_sub_epi32(_mm_add_epi32(_mm256_castsi256_si128(r8), _mm256_extracti128_si256(r8, 1)),
                                        _mm_set1_epi32(128 * q_sum[j]));
        store_lanes(s[j] + t0 + t, _mm_cvtepi32_ps(r), valid);
      }
    }
  }
  // The same integers for many queries at once (prefill, verify), with the
  // queries in the lanes: lane j of qt[c] holds bytes 4c..4c+3 of query j,
  // and each key's 4-byte groups are broadcast against them, so a position's
  // 16 scores come out of hd / 4 vpdpbusd with no horizontal sums. Here the
  // keys are the unsigned operand: `kx` holds the block's key codes + 128
  // (xor 0x80), and 128 * sum(q_j) comes off lane j. Sixteen positions at a
  // time, transposed to one vector per query for the stores.
  static void q8_dots_lanes(const __m512i* qt, __m512i q_sum128, int n_q, const uint8_t* kx, int n_t, int hd,
                            float* const* s, int t0) {
    const int quads = hd / 4;
    for (int t = 0; t < n_t; t += 16) {
      const int valid = std::min(16, n_t - t);
      __m512i acc[16];
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_si512();
      const uint8_t* row[16];
      for (int r = 0; r < 16; ++r) row[r] = kx + static_cast<size_t>(t + std::min(r, valid - 1)) * hd;
      for (int c = 0; c < quads; ++c) {
        const __m512i qc = _mm512_load_si512(qt + c);
        for (int r = 0; r < 16; ++r) {
          int32_t w;
          std::memcpy(&w, row[r] + 4 * c, 4);
          acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(w), qc);
        }
      }
      __m512 f[16];
      for (int r = 0; r < 16; ++r) f[r] = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r], q_sum128));
      transpose16(f);
      const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1);
      for (int j = 0; j < n_q; ++j) _mm512_mask_storeu_ps(s[j] + t0 + t, keep, f[j]);
    }
  }

  // Integer scores of n_q queries over `span` keys (HasQ8Dots in
  // attention_impl.h): with more than 4 queries, queries in the lanes
  // (q8_dots_lanes, through `buf`: kWidenFloats * 4 bytes); else one dot
  // product per query and key (q8_dots).
  static void q8_scores(const int8_t* const* q, const int* q_sum, int n_q, const int8_t* k, int span, int hd,
                        float* const* s, uint8_t* buf) {
    if (n_q <= 4 || hd % 4 != 0) {
      for (int t0 = 0; t0 < span; t0 += kAttnBlock) {
        const int n_t = std::min(kAttnBlock, span - t0);
        const int8_t* kb = k + static_cast<size_t>(t0) * hd;
        int j = 0;
        for (; j + 4 <= n_q; j += 4) q8_dots<4>(q + j, q_sum + j, kb, n_t, hd, s + j, t0);
        for (; j + 2 <= n_q; j += 2) q8_dots<2>(q + j, q_sum + j, kb, n_t, hd, s + j, t0);
        if (j < n_q) q8_dots<1>(q + j, q_sum + j, kb, n_t, hd, s + j, t0);
      }
      return;
    }
    alignas(64) __m512i qt[kQ8MaxHeadDim / 4];
    alignas(64) int32_t lanes[16];
    for (int c = 0; c < hd / 4; ++c) {
      for (int j = 0; j < 16; ++j) {
        lanes[j] = 0;
        if (j < n_q) std::memcpy(&lanes[j], q[j] + 4 * c, 4);
      }
      qt[c] = _mm512_load_si512(lanes);
    }
    for (int j = 0; j < 16; ++j) lanes[j] = j < n_q ? 128 * q_sum[j] : 0;
    const __m512i q_sum128 = _mm512_load_si512(lanes);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const int block = kWidenFloats * 4 / hd / 16 * 16;
    for (int t0 = 0; t0 < span; t0 += block) {
      const int n_t = std::min(block, span - t0);
      const int8_t* kb = k + static_cast<size_t>(t0) * hd;
      const size_t bytes = static_cast<size_t>(n_t) * hd;
      size_t i = 0;
      for (; i + 64 <= bytes; i += 64)
        _mm512_store_si512(buf + i, _mm512_xor_si512(_mm512_loadu_si512(kb + i), flip));
      for (; i < bytes; ++i) buf[i] = static_cast<uint8_t>(kb[i]) ^ 0x80;
      q8_dots_lanes(qt, q_sum128, n_q, buf, n_t, hd, s, t0);
    }
  }

  // The same integers by float FMAs (exact: see kQ8MaxHeadDim), for head
  // sizes that are not a multiple of 64.
  template <int NQ>
  static void q8_dots_float(const int8_t* const* q, const int8_t* k, int n_t, int hd, float* const* s, int t0) {
    for (int j = 0; j < NQ; ++j) {
      alignas(64) float f[kQ8MaxHeadDim];
      for (int i = 0; i < hd; ++i) f[i] = q[j][i];
      const float* fq = f;
      scores<1>(&fq, k, n_t, hd, 1.0f, s + j, t0);
    }
  }

  // Up to 128 columns per pass (8 vectors per query).
  template <int NQ, class P>
  static void values(const float* const* p, P v, int n_t, int hd, float* const* out, int t0, bool first) {
    for (int d = 0; d < hd; d += 128) {
      const int w = std::min(128, hd - d) / 16;
      int i = 0;
      if (NQ == 4) {  // four queries: passes of 64 columns
        for (; i + 4 <= w; i += 4) pass<NQ, 4>(p, v, n_t, hd, out, t0, first, d + 16 * i);
      } else if (w == 8) {
        pass<NQ, 8>(p, v, n_t, hd, out, t0, first, d);
        i = 8;
      }
      for (; i < w; ++i) pass<NQ, 1>(p, v, n_t, hd, out, t0, first, d + 16 * i);
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
