// 16-lane vector traits for AArch64: a lane group is four 128-bit registers
// (4 rows each). NeonFloat is baseline Advanced SIMD (any aarch64 core);
// NeonDot adds the dot-product extension: sdot by element multiplies each
// row's 4 weight bytes by the same 4 activation bytes, which is exactly the
// PQ layout's broadcast (core/pq_format.h). NeonDot's integer functions
// compile only in translation units built with +dotprod (they are inline
// and never emitted unless used). Unnamed namespace: see x86_vec.h.
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace pocket::kernels {
namespace {

inline float half_to_float(const uint8_t* p) {
  const uint16_t bits = static_cast<uint16_t>(p[0] | p[1] << 8);
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(bits))), 0);
}

// nib | (bit s of each plane byte moved to bit 4): a PQ5 code
// (core/pq_format.h). USHL by 4 - s shifts right when s > 4.
inline uint8x16_t arm_with_bit(uint8x16_t nib, uint8x16_t plane, int s) {
  return vorrq_u8(nib, vandq_u8(vshlq_u8(plane, vdupq_n_s8(static_cast<int8_t>(4 - s))), vdupq_n_u8(0x10)));
}

// Stores the first `valid` of the 4R rows in v[0..R) at y (a token's row
// block; the last block of a matrix may be short): full blocks straight to
// y, short ones through a buffer.
template <int R>
__attribute__((always_inline)) inline void store_rows(float* y, const float32x4_t* v, int valid) {
  if (valid == 4 * R) {
    for (int i = 0; i < R; ++i) vst1q_f32(y + 4 * i, v[i]);
    return;
  }
  float out[4 * R];
  for (int i = 0; i < R; ++i) vst1q_f32(out + 4 * i, v[i]);
  std::copy(out, out + valid, y);
}

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
  static F load_bf16(const void* p) {  // bf16 is the top half of an f32
    F r;
    const auto* h = static_cast<const uint16_t*>(p);
    for (int i = 0; i < 4; ++i) r.v[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h + 4 * i), 16));
    return r;
  }
  static float half(const uint8_t* p) { return half_to_float(p); }
  static F load_f32(const float* p) {
    F r;
    for (int i = 0; i < 4; ++i) r.v[i] = vld1q_f32(p + 4 * i);
    return r;
  }
  static void store(float* p, F a) {
    for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, a.v[i]);
  }
  static float hsum(F a) { return vaddvq_f32(vaddq_f32(vaddq_f32(a.v[0], a.v[1]), vaddq_f32(a.v[2], a.v[3]))); }
};

struct NeonDot : NeonFloat {
  struct I {
    int32x4_t v[4];
  };
  static constexpr int kS8Bias = 0;  // sdot is signed x signed
  static constexpr bool kInt16Sums = false;  // sdot widens in the same instruction

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
  template <int S>
  static I with_bit(I nib, I plane) {
    for (int i = 0; i < 4; ++i)
      nib.v[i] = vreinterpretq_s32_u8(arm_with_bit(vreinterpretq_u8_s32(nib.v[i]), vreinterpretq_u8_s32(plane.v[i]), S));
    return nib;
  }
  static I bcast4(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, 4);
    int32x4_t b = vdupq_n_s32(v);
    return {{b, b, b, b}};
  }
  // Codes 0..31 are valid signed bytes, so one signed dot serves both.
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

// 32-element block traits for the GGUF kernels (gguf_kernels.h): a block is
// two 16-byte registers. ArmMullBlocks is baseline NEON (widening
// multiplies, pairwise adds), ArmDotBlocks uses sdot and compiles only where
// +dotprod is on (as NeonDot above); their int32 lanes hold the same sums.
struct ArmBlocksBase {
  struct W {
    int8x16_t a, b;  // elements 0-15, 16-31
  };
  using D = int32x4_t;
  using A = float32x4_t;
  static constexpr int kS8Bias = 0;  // the dots are signed x signed

  static float half(const uint8_t* p) { return half_to_float(p); }
  static W load32(const uint8_t* p) { return {vld1q_s8(reinterpret_cast<const int8_t*>(p)), vld1q_s8(reinterpret_cast<const int8_t*>(p + 16))}; }
  static W nibbles16(const uint8_t* p) {
    const uint8x16_t q = vld1q_u8(p);
    return {vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vreinterpretq_s8_u8(vshrq_n_u8(q, 4))};
  }
  // Byte j gets byte j / 8 of the word, tests bit j % 8 and becomes 0x10 or 0.
  static W bits32_to_16(const uint8_t* p) {
    uint32_t m;
    std::memcpy(&m, p, 4);
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull)), hi = vdupq_n_u8(0x10);
    const uint8x16_t lo_bytes = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(m)), vdup_n_u8(static_cast<uint8_t>(m >> 8)));
    const uint8x16_t hi_bytes = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(m >> 16)), vdup_n_u8(static_cast<uint8_t>(m >> 24)));
    return {vreinterpretq_s8_u8(vandq_u8(vtstq_u8(lo_bytes, bit), hi)), vreinterpretq_s8_u8(vandq_u8(vtstq_u8(hi_bytes, bit), hi))};
  }
  template <class F>
  static W each(W w, F f) {
    return {vreinterpretq_s8_u8(f(vreinterpretq_u8_s8(w.a))), vreinterpretq_s8_u8(f(vreinterpretq_u8_s8(w.b)))};
  }
  static W low4(W w) { return each(w, [](uint8x16_t v) { return vandq_u8(v, vdupq_n_u8(0x0f)); }); }
  static W high4(W w) { return each(w, [](uint8x16_t v) { return vshrq_n_u8(v, 4); }); }
  template <int S>
  static uint8x16_t move_to_4(uint8x16_t v) {
    if constexpr (S > 4) return vshrq_n_u8(v, S - 4);
    if constexpr (S < 4) return vshlq_n_u8(v, 4 - S);
    return v;
  }
  template <int S>
  static W bit_to_16(W qh) { return each(qh, [](uint8x16_t v) { return vandq_u8(move_to_4<S>(v), vdupq_n_u8(0x10)); }); }
  template <int S>
  static W pair_to_48(W qh) { return each(qh, [](uint8x16_t v) { return vandq_u8(move_to_4<S>(v), vdupq_n_u8(0x30)); }); }
  static W or_(W x, W y) { return {vorrq_s8(x.a, y.a), vorrq_s8(x.b, y.b)}; }
  static constexpr bool kQ6Unsigned = false;  // sdot / smull take the signed codes as they are
  static W minus32(W w) { return {vsubq_s8(w.a, vdupq_n_s8(32)), vsubq_s8(w.b, vdupq_n_s8(32))}; }
  static uint64_t k_scales(uint64_t b) { return b; }
  template <int J>
  static int scale16(uint64_t b) {
    return static_cast<int>(b >> (8 * J) & 0xff);
  }
  struct ScalePair {
    int lo, hi;
  };
  static const int8_t* q6_scales(const int8_t* sc) { return sc; }
  template <int K>
  static ScalePair scale16_pair(const int8_t* sc) {
    return {sc[2 * K], sc[2 * K + 1]};
  }
  static D dzero() { return vdupq_n_s32(0); }
  static D dadd(D a, D b) { return vaddq_s32(a, b); }
  static A zero() { return vdupq_n_f32(0); }
  static A fma(D d, float s, A acc) { return vfmaq_n_f32(acc, vcvtq_f32_s32(d), s); }
  static A add(A a, A b) { return vaddq_f32(a, b); }
  static float hsum(A v) { return vaddvq_f32(v); }

  struct F8 {
    float32x4_t lo, hi;
  };
  static F8 bytes_to_f8(uint64_t b, float s) {
    const uint16x8_t v = vmovl_u8(vcreate_u8(b));
    return {vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(v))), s),
            vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(v)), s)};
  }
  static F8 load8(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
  static F8 fma8(F8 a, F8 b, F8 c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
  static F8 zero8() { return {vdupq_n_f32(0), vdupq_n_f32(0)}; }
  static float hsum8(F8 v) { return vaddvq_f32(vaddq_f32(v.lo, v.hi)); }
};

struct ArmMullBlocks : ArmBlocksBase {
  // The dot of 16 bytes with sdot's lanes (lane i: bytes 4i..4i+3), so the
  // two ARM levels produce the same integers lane by lane and therefore
  // bit-identical floats: widening products (<= 128 * 127 in int16), then
  // two pairwise widening adds.
  static D dot16(int8x16_t w, const int8_t* q) {
    const int8x16_t x = vld1q_s8(q);
    return vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x))), vpaddlq_s16(vmull_high_s8(w, x)));
  }
  static D dot_u(W w, const int8_t* q) { return vaddq_s32(dot16(w.a, q), dot16(w.b, q + 16)); }
  static D dot_s8(W w, const int8_t* q) { return dot_u(w, q); }
  static D dot_u_acc(D acc, W w, const int8_t* q, int s) { return vmlaq_n_s32(acc, dot_u(w, q), s); }
  static D dot_s16_acc(D acc, W w, const int8_t* q, ScalePair s) {
    return vmlaq_n_s32(vmlaq_n_s32(acc, dot16(w.a, q), s.lo), dot16(w.b, q + 16), s.hi);
  }
};

struct ArmDotBlocks : ArmBlocksBase {
  static D dot16(int8x16_t w, const int8_t* q) { return vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(q)); }
  static D dot_u(W w, const int8_t* q) { return vdotq_s32(dot16(w.a, q), w.b, vld1q_s8(q + 16)); }
  static D dot_s8(W w, const int8_t* q) { return dot_u(w, q); }
  static D dot_u_acc(D acc, W w, const int8_t* q, int s) { return vmlaq_n_s32(acc, dot_u(w, q), s); }
  static D dot_s16_acc(D acc, W w, const int8_t* q, ScalePair s) {
    return vmlaq_n_s32(vmlaq_n_s32(acc, dot16(w.a, q), s.lo), dot16(w.b, q + 16), s.hi);
  }
};

}  // namespace
}  // namespace pocket::kernels
