// Baseline AArch64 Advanced SIMD pieces shared by the NEON element-wise
// kernels (ops_neon.cpp) and the attention of every ARM level: exp and
// softmax, and the inner loops of the multi-query attention
// (AttentionOpsNeon; driver: attention_impl.h), which the dotprod level
// extends with integer q8 scores (attention_dotprod.cpp). Unnamed
// namespace: each translation unit keeps its own copy, compiled with its own
// flags (see x86_vec.h).
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_impl.h"

namespace pocket::kernels {
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


inline void softmax_neon(float* x, int n) {
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


// Stores the first `valid` (1..4) lanes of r at dst: four attention scores
// at a time, the last step of a block possibly short (as x86_math.h's).
inline void store_lanes(float* dst, float32x4_t r, int valid) {
  if (valid == 4) {
    vst1q_f32(dst, r);
  } else {
    float tmp[4];
    vst1q_f32(tmp, r);
    std::copy(tmp, tmp + valid, dst);
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
  // Widen K/V blocks once per task (attention_impl.h): not fp16 (fcvtl is
  // one instruction per 4 values), as on AVX2.
  template <class P>
  static constexpr bool kWidenRows = !std::is_same_v<P, const uint16_t*>;
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
        store_lanes(s[j] + t0 + t, r, valid);
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

}  // namespace
}  // namespace pocket::kernels
