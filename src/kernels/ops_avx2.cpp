// Vectorised element-wise kernels (AVX2 + FMA + F16C). They are memory- or
// latency-bound at the model's sizes, so the AVX-512 level reuses them.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/x86_math.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

void rmsnorm_avx2(float* out, const float* x, const float* weight, int n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i), acc);
  float ss = hsum8(acc);
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

// gate = act(gate) * up with act(x) = x * sigmoid(a(x)): a(x) = x is SiLU;
// a(x) = 2 sqrt(2/pi) (x + 0.044715 x^3) is tanh-GELU, as
// 0.5 (1 + tanh(y)) = sigmoid(2y).
template <bool kGelu>
void glu_avx2(float* gate, const float* up, int n) {
  int i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c1 = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c3 = _mm256_set1_ps(0.044715f);
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 neg_a = kGelu ? _mm256_mul_ps(c1, _mm256_fmadd_ps(_mm256_mul_ps(c3, g), _mm256_mul_ps(g, g), g))
                         : _mm256_sub_ps(_mm256_setzero_ps(), g);
    __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, exp8(neg_a)));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_mul_ps(g, sig), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    // The tail goes through the same polynomial in a padded vector, so an
    // element's result does not depend on where the row was split.
    alignas(32) float g[8] = {}, u[8] = {};
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    glu_avx2<kGelu>(g, u, 8);
    std::copy(g, g + (n - i), gate + i);
  }
}

// cos/sin are computed once per call (not per head) with the same libm calls
// as the scalar reference, so results match it up to FMA contraction.
void rope_avx2(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq) {
  const int half = head_dim / 2;
  float cs[256], sn[256];  // head_dim <= 512
  if (half > 256) {
    for (int h = 0; h < n_heads; ++h) kernel_table(Isa::Scalar).rope(x + h * head_dim, 1, head_dim, pos, style, inv_freq);
    return;
  }
  for (int i = 0; i < half; ++i) {
    float angle = static_cast<float>(pos) * inv_freq[i];
    cs[i] = std::cos(angle), sn[i] = std::sin(angle);
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    int i = 0;
    if (style == RopeStyle::Halves) {
      for (; i + 8 <= half; i += 8) {
        __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + half + i);
        __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
      }
    }
    for (; i < half; ++i) {
      int a = style == RopeStyle::Halves ? i : 2 * i, b = style == RopeStyle::Halves ? i + half : 2 * i + 1;
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// 8 int8 values of a q8 row, widened to float (the driver applies the scale).
inline __m256 load8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
// 8 elements of a q4 row (one nibble side of 8 bytes), as code - 8.
inline __m256 load8(Q4Ptr p) {
  __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p.bytes())));
  c = _mm256_and_si256(_mm256_srl_epi32(c, _mm_cvtsi32_si128(p.high() ? 4 : 0)), _mm256_set1_epi32(15));
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(c, _mm256_set1_epi32(8)));
}

// Inner loops of the multi-query attention (driver: attention_impl.h).
struct AttentionOpsAvx2 {
  static constexpr int kLanes = 8;
  static void softmax(float* x, int n) { softmax_avx2(x, n); }
  // Widen K/V blocks once per task (attention_impl.h): not fp16: F16C
  // converts 8 values in one instruction, and reading the floats back costs
  // more (measured 9.4 -> 11.2 ns per query and position).
  template <class P>
  static constexpr bool kWidenRows = !std::is_same_v<P, const uint16_t*>;
  template <class P>
  static void widen(P p, int n, float* out) {
    for (int i = 0; i < n; i += 8) _mm256_store_ps(out + i, load8(p + i));
  }

  // s_j[t0 + t] = scale * q_j . K[t] for t in [0, n_t), for NQ (1 or 2) queries
  // at once. Four positions per step: each K chunk converted feeds 4 * NQ
  // independent FMA chains, and one hadd tree turns 4 accumulators into 4
  // scores instead of a full horizontal sum per position. The last step of a
  // block with fewer than 4 positions repeats its last row and drops the
  // copies, so every score is computed the same way wherever the position
  // falls: one query's scores do not depend on the span of the others
  // (batch invariance: decode, verify and prefill agree bit for bit).
  template <int NQ, class P>
  static void scores(const float* const* q, P k, int n_t, int hd, float scale, float* const* s, int t0) {
    const __m128 vscale = _mm_set1_ps(scale);
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      __m256 acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = _mm256_setzero_ps();
      P kt = k + static_cast<size_t>(t) * hd;
      P rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 8) {
        __m256 qd[NQ];
        for (int j = 0; j < NQ; ++j) qd[j] = _mm256_loadu_ps(q[j] + d);
        for (int p = 0; p < 4; ++p) {
          const __m256 kv = load8(rows[p] + d);
          for (int j = 0; j < NQ; ++j) acc[j][p] = _mm256_fmadd_ps(qd[j], kv, acc[j][p]);
        }
      }
      for (int j = 0; j < NQ; ++j) {
        // hadd(hadd(a0, a1), hadd(a2, a3)) leaves position p's partial sums in
        // lane p of each 128-bit half.
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[j][0], acc[j][1]), _mm256_hadd_ps(acc[j][2], acc[j][3]));
        const __m128 r = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), vscale);
        store_lanes(s[j] + t0 + t, r, valid);
      }
    }
  }

  // q8 scores as integers (HasQ8Dots in attention_impl.h) for head_dim a
  // multiple of 32, four positions and two queries per step: vpmaddubsw
  // multiplies unsigned by signed bytes, so it takes |q| and k * sign(q)
  // (vpsignb); with codes in [-127, 127] a pair of products stays inside
  // int16 (2 * 127 * 127 < 32767), and vpmaddwd widens the pairs to int32.
  template <int NQ>
  static void q8_dots(const int8_t* const* q, const int8_t* k, int n_t, int hd, float* const* s, int t0) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      __m256i acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = _mm256_setzero_si256();
      const int8_t* kt = k + static_cast<size_t>(t) * hd;
      const int8_t* rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 32) {
        __m256i qd[NQ], qa[NQ];
        for (int j = 0; j < NQ; ++j) {
          qd[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[j] + d));
          qa[j] = _mm256_sign_epi8(qd[j], qd[j]);
        }
        for (int p = 0; p < 4; ++p) {
          const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[p] + d));
          for (int j = 0; j < NQ; ++j) {
            const __m256i pairs = _mm256_maddubs_epi16(qa[j], _mm256_sign_epi8(kv, qd[j]));
            acc[j][p] = _mm256_add_epi32(acc[j][p], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
      for (int j = 0; j < NQ; ++j) {
        const __m256i h =
            _mm256_hadd_epi32(_mm256_hadd_epi32(acc[j][0], acc[j][1]), _mm256_hadd_epi32(acc[j][2], acc[j][3]));
        const __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        store_lanes(s[j] + t0 + t, _mm_cvtepi32_ps(r), valid);
      }
    }
  }

  static void q8_scores(const int8_t* const* q, const int*, int n_q, const int8_t* k, int span, int hd,
                        float* const* s, uint8_t*) {
    q8_scores_in_pairs<AttentionOpsAvx2>(q, n_q, k, span, hd, s, 32);
  }

  // out_j += sum_t p_j[t0 + t] V[t] over t in [0, n_t) (out_j = ... when
  // `first`), NQ (1 or 2) queries and 32 columns per pass: 8 accumulators,
  // 4 converted V vectors and 2 broadcasts fit the 16 ymm registers.
  template <int NQ, class P>
  static void values(const float* const* p, P v, int n_t, int hd, float* const* out, int t0, bool first) {
    for (int d = 0; d < hd; d += 32) {
      const int w = std::min(32, hd - d) / 8;  // vectors in this pass (hd is a multiple of 8)
      __m256 acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int i = 0; i < 4; ++i) acc[j][i] = (first || i >= w) ? _mm256_setzero_ps() : _mm256_loadu_ps(out[j] + d + 8 * i);
      if (w == 4) {
        for (int t = 0; t < n_t; ++t) {
          P vt = v + static_cast<size_t>(t) * hd + d;
          if (d == 0) prefetch_row(vt + kAttnPrefetchRows * hd, hd);
          const __m256 v0 = load8(vt), v1 = load8(vt + 8), v2 = load8(vt + 16), v3 = load8(vt + 24);
          for (int j = 0; j < NQ; ++j) {
            const __m256 pj = _mm256_broadcast_ss(p[j] + t0 + t);
            acc[j][0] = _mm256_fmadd_ps(pj, v0, acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(pj, v1, acc[j][1]);
            acc[j][2] = _mm256_fmadd_ps(pj, v2, acc[j][2]);
            acc[j][3] = _mm256_fmadd_ps(pj, v3, acc[j][3]);
          }
        }
      } else {
        for (int t = 0; t < n_t; ++t)
          for (int i = 0; i < w; ++i) {
            const __m256 vi = load8(v + static_cast<size_t>(t) * hd + d + 8 * i);
            for (int j = 0; j < NQ; ++j) acc[j][i] = _mm256_fmadd_ps(_mm256_broadcast_ss(p[j] + t0 + t), vi, acc[j][i]);
          }
      }
      for (int j = 0; j < NQ; ++j)
        for (int i = 0; i < w; ++i) _mm256_storeu_ps(out[j] + d + 8 * i, acc[j][i]);
    }
  }
};

void attention_heads_avx2(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int hd, float scale,
                          float* scratch) {
  attention_heads_blocked<AttentionOpsAvx2>(qs, k, nullptr, v, nullptr, hd, scale, scratch);
}

void attention_heads_q8_avx2(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int hd, float scale, float* scratch) {
  attention_heads_blocked<AttentionOpsAvx2>(qs, k.q, k.scale, v.q, v.scale, hd, scale, scratch);
}

void attention_heads_q4_avx2(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int hd, float scale, float* scratch) {
  attention_heads_blocked<AttentionOpsAvx2>(qs, Q4Ptr{k.q, 0}, k.scale, Q4Ptr{v.q, 0}, v.scale, hd, scale, scratch);
}

void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void f16_to_f32_row_avx2(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

}  // namespace

void install_x86_ops(KernelTable& t) {
  t.rmsnorm = rmsnorm_avx2;
  t.softmax = softmax_avx2;
  t.swiglu = glu_avx2<false>;
  t.geglu = glu_avx2<true>;
  t.rope = rope_avx2;
  t.attention_heads = attention_heads_avx2;
  t.attention_heads_q8 = attention_heads_q8_avx2;
  t.attention_heads_q4 = attention_heads_q4_avx2;
  t.f32_to_f16_row = f32_to_f16_row_avx2;
  t.f16_to_f32_row = f16_to_f32_row_avx2;
}

}  // namespace pocket::kernels
