// The blocking of multi-query attention (kernels::attention_heads), written
// once for every SIMD level. An ISA file supplies the inner loops as an
// `Ops` type:
//   template <int NQ, class P> static void scores(q, k, n_t, hd, scale, s, t0);
//       s[j][t0 + t] = scale * q[j] . K[t], t in [0, n_t), NQ = 1 or 2
//   template <int NQ, class P> static void values(p, v, n_t, hd, out, t0, first);
//       out[j] (=, or += unless first) sum_t p[j][t0 + t] V[t]
// where P points at elements: const uint16_t* (fp16), const int8_t* (the
// q8 cache) or Q4Ptr (the q4 cache; the ISA file's loads take all three).
// The q8 and q4 row scales the driver applies: to a key's score after `scores`, to a value's
// softmax weight before `values`, the same way for every query, so batch
// invariance holds for both types).
//   static void softmax(float* x, int n);
//   static constexpr int kLanes;   // head_dim must be a multiple of this
// Included only by ISA-specific translation units; unnamed namespace for
// the reason given in x86_vec.h.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/table.h"

namespace pocket::kernels {
namespace {

// Positions per block: 64 fp16 rows of 128 are 16 KB, so a block of K or V
// stays in L1 while every pair of queries uses it.
constexpr int kAttnBlock = 64;

// The inner loops prefetch the K/V rows this far ahead (8 KB at head_dim
// 128). Measured on Zen 4 at 768 positions, one thread: no prefetch 17 GB/s
// of K/V, 8 rows 30, 16 rows 35, 32 rows 42, 64 rows 39. Rows past the
// head's last position belong to the next head or are unmapped reserve;
// prefetches never fault.
constexpr int kAttnPrefetchRows = 32;

template <class T>
inline void prefetch_row(const T* row, int hd) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int b = 0; b < hd * static_cast<int>(sizeof(T)); b += 64) __builtin_prefetch(p + b);
}

// Element `elem` of q4 rows starting at `base` (kernels::Q4Rows layout;
// the SIMD loops take head_dim a multiple of 32, so every group holds 32
// elements). Pointer arithmetic counts elements, as for the other types.
// A load of 4, 8 or 16 elements at a multiple of that count reads bytes()
// onwards and takes their low nibbles (elements 0-15 of a group) or their
// high nibbles (16-31), as high() says.
struct Q4Ptr {
  const uint8_t* base;
  size_t elem;
  Q4Ptr operator+(size_t n) const { return {base, elem + n}; }
  Q4Ptr& operator+=(size_t n) {
    elem += n;
    return *this;
  }
  const uint8_t* bytes() const { return base + elem / 32 * 16 + elem % 16; }
  bool high() const { return (elem & 16) != 0; }
};
inline void prefetch_row(Q4Ptr row, int hd) {
  const char* p = reinterpret_cast<const char*>(row.base + row.elem / 2);
  for (int b = 0; b < hd / 2; b += 64) __builtin_prefetch(p + b);
}

// The scalar reference, for head sizes an ISA's loops do not take.
inline void attention_fallback(const AttentionQueries& qs, const uint16_t* k, const float*, const uint16_t* v,
                               const float*, int hd, float scale, float* scratch) {
  kernel_table(Isa::Scalar).attention_heads(qs, k, v, hd, scale, scratch);
}
inline void attention_fallback(const AttentionQueries& qs, const int8_t* k, const float* ks, const int8_t* v,
                               const float* vs, int hd, float scale, float* scratch) {
  kernel_table(Isa::Scalar).attention_heads_q8(qs, {k, ks}, {v, vs}, hd, scale, scratch);
}

inline void attention_fallback(const AttentionQueries& qs, Q4Ptr k, const float* ks, Q4Ptr v, const float* vs, int hd,
                               float scale, float* scratch) {
  kernel_table(Isa::Scalar).attention_heads_q4(qs, {k.base + k.elem / 2, ks}, {v.base + v.elem / 2, vs}, hd, scale,
                                                scratch);
}
template <class P>
constexpr int lanes_needed(int lanes) {
  return std::is_same_v<P, Q4Ptr> ? 32 : lanes;  // q4: whole groups of 32
}

// k_scale / v_scale: the row scales of a q8 or q4 cache, null for fp16.
template <class Ops, class P>
void attention_heads_blocked(const AttentionQueries& qs, P k, const float* k_scale, P v, const float* v_scale, int hd,
                             float scale, float* scratch) {
  if (hd % lanes_needed<P>(Ops::kLanes) != 0) {
    attention_fallback(qs, k, k_scale, v, v_scale, hd, scale, scratch);
    return;
  }
  // Positions [lo, max_ctx) cover every query; scores are indexed from lo.
  int lo = qs.first[0], max_ctx = 0;
  for (int j = 0; j < qs.n; ++j) lo = std::min(lo, qs.first[j]), max_ctx = std::max(max_ctx, qs.n_ctx[j]);
  k += static_cast<size_t>(lo) * hd;
  v += static_cast<size_t>(lo) * hd;
  if (k_scale) k_scale += lo, v_scale += lo;
  const int span = max_ctx - lo;
  float* s[kMaxAttentionQueries];
  for (int j = 0; j < qs.n; ++j) s[j] = scratch + static_cast<size_t>(j) * span;
  // Scores for every query over the whole span (a query's positions outside
  // its own [first, n_ctx) are valid rows of other tokens; the mask drops them).
  for (int t0 = 0; t0 < span; t0 += kAttnBlock) {
    const int n_t = std::min(kAttnBlock, span - t0);
    const P kb = k + static_cast<size_t>(t0) * hd;
    int j = 0;
    for (; j + 2 <= qs.n; j += 2) Ops::template scores<2>(qs.q + j, kb, n_t, hd, scale, s + j, t0);
    if (j < qs.n) Ops::template scores<1>(qs.q + j, kb, n_t, hd, scale, s + j, t0);
    if (k_scale)
      for (j = 0; j < qs.n; ++j)
        for (int t = t0; t < t0 + n_t; ++t) s[j][t] *= k_scale[t];
  }
  for (int j = 0; j < qs.n; ++j) {
    const int a = qs.first[j] - lo, b = qs.n_ctx[j] - lo;
    Ops::softmax(s[j] + a, b - a);
    std::fill(s[j], s[j] + a, 0.0f);  // the sliding window
    std::fill(s[j] + b, s[j] + span, 0.0f);  // the causal mask
    if (v_scale)
      for (int t = a; t < b; ++t) s[j][t] *= v_scale[t];
  }
  for (int t0 = 0; t0 < span; t0 += kAttnBlock) {
    const int n_t = std::min(kAttnBlock, span - t0);
    const P vb = v + static_cast<size_t>(t0) * hd;
    int j = 0;
    for (; j + 2 <= qs.n; j += 2) Ops::template values<2>(s + j, vb, n_t, hd, qs.out + j, t0, t0 == 0);
    if (j < qs.n) Ops::template values<1>(s + j, vb, n_t, hd, qs.out + j, t0, t0 == 0);
  }
}

}  // namespace
}  // namespace pocket::kernels
