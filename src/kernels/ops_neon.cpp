// Vectorised element-wise kernels for baseline AArch64 Advanced SIMD (no
// extensions, so cortex-a53-class cores get them). Same algorithms as
// ops_avx2.cpp; the dotprod and i8mm levels inherit them.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_neon.h"
#include "kernels/table.h"

namespace pocket::kernels {

void install_neon_matmul(KernelTable& t);  // kernels_neon.cpp

namespace {

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
