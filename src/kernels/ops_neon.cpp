// Vectorised element-wise kernels for baseline AArch64 Advanced SIMD (no
// extensions, so cortex-a53-class cores get them). Same algorithms as
// ops_avx2.cpp; the dotprod and i8mm levels inherit them.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_impl.h"
#include "kernels/table.h"

namespace pocket::kernels {

void install_neon_matmul(KernelTable& t);  // kernels_neon.cpp

namespace {

// exp(x) = 2^n * p(r), x = n ln2 + r, |r| <= ln2/2, degree-6 Taylor
// polynomial: ~2 ulp relative error on [-87, 88]; below -87 it flushes to 0,
// above 88 it saturates at exp(88) (finite). Same as exp8 in ops_avx2.cpp.
inline float32x4_t exp4(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.0f), hi = vdupq_n_f32(88.0f);
  const uint32x4_t under = vcltq_f32(x, lo);
  x = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504089f)));
  // Two-part ln2 (Cody-Waite) keeps r accurate for |n| up to 127.
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  // n is integral in [-126, 127], so 2^n is a normal float built directly.
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t v = vmulq_f32(p, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), under));
}

void rmsnorm_neon(float* out, const float* x, const float* weight, int n, float eps) {
  // Two accumulators: the FMA latency would otherwise bound the loop.
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + 4);
    a0 = vfmaq_f32(a0, x0, x0);
    a1 = vfmaq_f32(a1, x1, x1);
  }
  float ss = vaddvq_f32(vaddq_f32(a0, a1));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const float32x4_t vinv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4)
    vst1q_f32(out + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), vinv), vld1q_f32(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void softmax_neon(float* x, int n) {
  if (n <= 0) return;
  int i = 0;
  float32x4_t vmax = vdupq_n_f32(-INFINITY);
  for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(x + i));
  float mx = vmaxvq_f32(vmax);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const float32x4_t vm = vdupq_n_f32(mx);
  float32x4_t vsum = vdupq_n_f32(0.0f);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i), vm));
    vst1q_f32(x + i, e);
    vsum = vaddq_f32(vsum, e);
  }
  float sum = vaddvq_f32(vsum);
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const float inv = 1.0f / sum;
  const float32x4_t vinv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

// gate = act(gate) * up with act(x) = x * sigmoid(a(x)): a(x) = x is SiLU;
// a(x) = 2 sqrt(2/pi) (x + 0.044715 x^3) is tanh-GELU, as
// 0.5 (1 + tanh(y)) = sigmoid(2y).
template <bool kGelu>
void glu_neon(float* gate, const float* up, int n) {
  int i = 0;
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t c1 = vdupq_n_f32(-2.0f * 0.7978845608028654f), c3 = vdupq_n_f32(0.044715f);
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t neg_a = kGelu ? vmulq_f32(c1, vfmaq_f32(g, vmulq_f32(c3, g), vmulq_f32(g, g))) : vnegq_f32(g);
    const float32x4_t sig = vdivq_f32(one, vaddq_f32(one, exp4(neg_a)));
    vst1q_f32(gate + i, vmulq_f32(vmulq_f32(g, sig), vld1q_f32(up + i)));
  }
  if (i < n) {
    // The tail goes through the same polynomial in a padded vector, so an
    // element's result does not depend on where the row was split.
    float g[4] = {}, u[4] = {};
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    glu_neon<kGelu>(g, u, 4);
    std::copy(g, g + (n - i), gate + i);
  }
}

// cos/sin are computed once per call (not per head) with the same libm
// calls as the scalar reference, so results match it up to FMA contraction
// (which the compiler applies to the reference as it sees fit).
void rope_neon(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq) {
  const int half = head_dim / 2;
  float cs[256], sn[256];  // head_dim <= 512
  if (half > 256) {
    kernel_table(Isa::Scalar).rope(x, n_heads, head_dim, pos, style, inv_freq);
    return;
  }
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cs[i] = std::cos(angle), sn[i] = std::sin(angle);
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (style == RopeStyle::Halves) {
      for (; i + 4 <= half; i += 4) {
        const float32x4_t x0 = vld1q_f32(v + i), x1 = vld1q_f32(v + half + i);
        const float32x4_t c = vld1q_f32(cs + i), s = vld1q_f32(sn + i);
        vst1q_f32(v + i, vsubq_f32(vmulq_f32(x0, c), vmulq_f32(x1, s)));
        vst1q_f32(v + half + i, vaddq_f32(vmulq_f32(x0, s), vmulq_f32(x1, c)));
      }
    } else {
      // ld2/st2 split even (x0) and odd (x1) elements of adjacent pairs.
      for (; i + 4 <= half; i += 4) {
        const float32x4x2_t p = vld2q_f32(v + 2 * i);
        const float32x4_t c = vld1q_f32(cs + i), s = vld1q_f32(sn + i);
        float32x4x2_t r;
        r.val[0] = vsubq_f32(vmulq_f32(p.val[0], c), vmulq_f32(p.val[1], s));
        r.val[1] = vaddq_f32(vmulq_f32(p.val[0], s), vmulq_f32(p.val[1], c));
        vst2q_f32(v + 2 * i, r);
      }
    }
    for (; i < half; ++i) {
      const int a = style == RopeStyle::Halves ? i : 2 * i, b = style == RopeStyle::Halves ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

// fcvtn/fcvtl round to nearest even like util/half.h; only NaN payloads can
// differ (the hardware keeps them, the scalar code writes a canonical NaN).
// Tails go through a padded buffer so every element uses the same path.
void f32_to_f16_row_neon(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
    vst1q_u16(y + i, vreinterpretq_u16_f16(h));
  }
  if (i < n) {
    float buf[8] = {};
    uint16_t out[8];
    std::copy(x + i, x + n, buf);
    f32_to_f16_row_neon(buf, out, 8);
    std::copy(out, out + (n - i), y + i);
  }
}

void f16_to_f32_row_neon(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
    vst1q_f32(y + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(y + i + 4, vcvt_high_f32_f16(h));
  }
  if (i < n) {
    uint16_t buf[8] = {};
    float out[8];
    std::copy(x + i, x + n, buf);
    f16_to_f32_row_neon(buf, out, 8);
    std::copy(out, out + (n - i), y + i);
  }
}

inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
// 4 int8 values of a q8 row, widened to float (the driver applies the scale);
// read as 4 bytes, never past the row.
inline float32x4_t load4(const int8_t* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
  return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

inline float32x4_t load4(const float* p) { return vld1q_f32(p); }

// 4 elements of a q4 row (one nibble side of 4 bytes), as code - 8.
inline float32x4_t load4(Q4Ptr p) {
  uint32_t w;
  std::memcpy(&w, p.bytes(), 4);
  uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(w));
  b = p.high() ? vshr_n_u8(b, 4) : vand_u8(b, vdup_n_u8(15));
  const int16x8_t h = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(b)), vdupq_n_s16(8));
  return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

// Inner loops of the multi-query attention (driver: attention_impl.h).
struct AttentionOpsNeon {
  static constexpr int kLanes = 4;
  static void softmax(float* x, int n) { softmax_neon(x, n); }
  template <class P>
  static void widen(P p, int n, float* out) {
    for (int i = 0; i < n; i += 4) vst1q_f32(out + i, load4(p + i));
  }

  // s_j[t0 + t] = scale * q_j . K[t], NQ (1 or 2) queries, four positions per
  // step: each converted K vector feeds 4 * NQ independent FMA chains and two
  // pairwise-add levels turn 4 accumulators into 4 scores. A short last step
  // repeats its last row, so every score takes the same path wherever it
  // falls (batch invariance, as on x86).
  template <int NQ, class P>
  static void scores(const float* const* q, P k, int n_t, int hd, float scale, float* const* s, int t0) {
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      float32x4_t acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = vdupq_n_f32(0.0f);
      P kt = k + static_cast<size_t>(t) * hd;
      P rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 4) {
        float32x4_t qd[NQ];
        for (int j = 0; j < NQ; ++j) qd[j] = vld1q_f32(q[j] + d);
        for (int p = 0; p < 4; ++p) {
          const float32x4_t kv = load4(rows[p] + d);
          for (int j = 0; j < NQ; ++j) acc[j][p] = vfmaq_f32(acc[j][p], qd[j], kv);
        }
      }
      for (int j = 0; j < NQ; ++j) {
        const float32x4_t r = vmulq_n_f32(
            vpaddq_f32(vpaddq_f32(acc[j][0], acc[j][1]), vpaddq_f32(acc[j][2], acc[j][3])), scale);
        if (valid == 4) {
          vst1q_f32(s[j] + t0 + t, r);
        } else {
          float tmp[4];
          vst1q_f32(tmp, r);
          std::copy(tmp, tmp + valid, s[j] + t0 + t);
        }
      }
    }
  }

  // out_j (+)= sum_t p_j[t0 + t] V[t], NQ (1 or 2) queries, up to 32 columns
  // per pass: 16 accumulators and 8 converted V vectors of the 32 registers.
  template <int NQ, class P>
  static void values(const float* const* p, P v, int n_t, int hd, float* const* out, int t0, bool first) {
    for (int d = 0; d < hd; d += 32) {
      const int w = std::min(32, hd - d) / 4;  // vectors in this pass (hd is a multiple of 4)
      float32x4_t acc[NQ][8];
      for (int j = 0; j < NQ; ++j)
        for (int i = 0; i < 8; ++i) acc[j][i] = (first || i >= w) ? vdupq_n_f32(0.0f) : vld1q_f32(out[j] + d + 4 * i);
      for (int t = 0; t < n_t; ++t) {
        P vt = v + static_cast<size_t>(t) * hd + d;
        if (d == 0) prefetch_row(vt + kAttnPrefetchRows * hd, hd);
        float32x4_t vv[8];
        for (int i = 0; i < w; ++i) vv[i] = load4(vt + 4 * i);
        for (int j = 0; j < NQ; ++j) {
          const float pj = p[j][t0 + t];
          for (int i = 0; i < w; ++i) acc[j][i] = vfmaq_n_f32(acc[j][i], vv[i], pj);
        }
      }
      for (int j = 0; j < NQ; ++j)
        for (int i = 0; i < w; ++i) vst1q_f32(out[j] + d + 4 * i, acc[j][i]);
    }
  }
};

void attention_heads_neon(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int hd, float scale,
                          float* scratch) {
  attention_heads_blocked<AttentionOpsNeon>(qs, k, nullptr, v, nullptr, hd, scale, scratch);
}

void attention_heads_q8_neon(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int hd, float scale, float* scratch) {
  attention_heads_blocked<AttentionOpsNeon>(qs, k.q, k.scale, v.q, v.scale, hd, scale, scratch);
}

void attention_heads_q4_neon(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int hd, float scale, float* scratch) {
  attention_heads_blocked<AttentionOpsNeon>(qs, Q4Ptr{k.q, 0}, k.scale, Q4Ptr{v.q, 0}, v.scale, hd, scale, scratch);
}

}  // namespace

void install_neon(KernelTable& t) {
  t.rmsnorm = rmsnorm_neon;
  t.softmax = softmax_neon;
  t.swiglu = glu_neon<false>;
  t.geglu = glu_neon<true>;
  t.rope = rope_neon;
  t.attention_heads = attention_heads_neon;
  t.attention_heads_q8 = attention_heads_q8_neon;
  t.attention_heads_q4 = attention_heads_q4_neon;
  t.f32_to_f16_row = f32_to_f16_row_neon;
  t.f16_to_f32_row = f16_to_f32_row_neon;
  install_neon_matmul(t);
}

}  // namespace pocket::kernels
