// 16-lane vector traits for AArch64: a lane group is four 128-bit registers
// (4 rows each). NeonFloat is baseline Advanced SIMD (any aarch64 core);
// NeonDot adds the dot-product extension: sdot by element multiplies each
// row's 4 weight bytes by the same 4 activation bytes, which is exactly the
// PQ layout's broadcast (core/pq_format.h). NeonDot's integer functions
// compile only in translation units built with +dotprod (they are inline
// and never emitted unless used). Unnamed namespace: see x86_vec.h.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace pocket::kernels {
namespace {

// The float half of the traits: baseline NEON only.
struct NeonFloat {
  struct F {
    float32x4_t v[4];
  };
  static F zero_f() { return {{vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)}}; }
  static F set1(float x) {
    float32x4_t v = vdupq_n_f32(x);
    return {{v, v, v, v}};
  }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < 4; ++i) c.v[i] = vfmaq_f32(c.v[i], a.v[i], b.v[i]);
    return c;
  }
  // fp16 -> fp32 widening (fcvtl) is baseline; only fp16 arithmetic needs +fp16.
  static F load_f16(const void* p) {
    F r;
    const auto* h = static_cast<const uint8_t*>(p);
    for (int i = 0; i < 4; ++i) r.v[i] = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(h + 8 * i)));
    return r;
  }
  static void store(float* p, F a) {
    for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, a.v[i]);
  }
};

struct NeonDot : NeonFloat {
  struct I {
    int32x4_t v[4];
  };
  static constexpr int kS8Bias = 0;  // sdot is signed x signed

  static I zero_i() { return {{vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)}}; }
  // Raw bytes travel in the int32 lanes; reinterpreted for the dot.
  static I load(const uint8_t* p) {
    I r;
    for (int i = 0; i < 4; ++i) r.v[i] = vreinterpretq_s32_u8(vld1q_u8(p + 16 * i));
    return r;
  }
  static I low_nibbles(I w) {
    for (auto& v : w.v) v = vreinterpretq_s32_u8(vandq_u8(vreinterpretq_u8_s32(v), vdupq_n_u8(0x0f)));
    return w;
  }
  static I high_nibbles(I w) {
    for (auto& v : w.v) v = vreinterpretq_s32_u8(vshrq_n_u8(vreinterpretq_u8_s32(v), 4));
    return w;
  }
  static I bcast4(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, 4);
    int32x4_t b = vdupq_n_s32(v);
    return {{b, b, b, b}};
  }
  // Nibbles (0..15) are valid signed bytes, so one signed dot serves both.
  static I dot_u8s8(I acc, I w, I x) { return dot_s8s8(acc, w, x); }
  static I dot_s8s8(I acc, I w, I x) {
    for (int i = 0; i < 4; ++i)
      acc.v[i] = vdotq_s32(acc.v[i], vreinterpretq_s8_s32(w.v[i]), vreinterpretq_s8_s32(x.v[i]));
    return acc;
  }
  static F to_f(I a) {
    F r;
    for (int i = 0; i < 4; ++i) r.v[i] = vcvtq_f32_s32(a.v[i]);
    return r;
  }
};

}  // namespace
}  // namespace pocket::kernels
