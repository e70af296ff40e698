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
//   template <class P> static void widen(P p, int n, float* out);
//       out[i] = element i of p (as the loads read it), n a multiple of kLanes
//   template <class P> static constexpr bool kWidenRows;  // whether widening P pays
// and the loads also take const float* (rows the driver widened itself).
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
// Widened rows (below) are in L1 already.
inline void prefetch_row(const float*, int) {}

// With more than one pair of queries, the driver widens each block of K and
// V rows to float once (in a stack buffer of this many floats, 16 KB) and
// every pair reads the floats, instead of every pair converting the same
// fp16/int8/4-bit rows again: the conversion dominated prefill at long
// contexts. It is exact, so scores and outputs are bit for bit those of the
// direct path (decode, with one pair, still reads the cache directly).
// 16 KB rather than 32: the floats and the rows they come from then stay in
// L1 together (16 queries over 512 positions, Sapphire Rapids: 3% faster).
constexpr int kWidenFloats = 4096;

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

// The q8 cache's scores (kernels.h): the query quantized as a cache row is,
// score = float(sum_i qcode_i * kcode_i) * (q_scale * scale) * k_scale[t].
// The integer dot product is exact on every level; through float FMAs too,
// since every partial sum is an integer of magnitude <= 127 * 127 * head_dim
// < 2^24 for head_dim <= kQ8MaxHeadDim, so q8 scores are the same bits on
// every ISA and for every grouping of queries. An ISA may supply
//   static void q8_scores(const int8_t* const* q, const int* q_sum, int n_q, const int8_t* k, int span, int hd,
//                         float* const* s, uint8_t* buf);
//       s[j][t] = float(q_j . K[t]), t in [0, span) (q_sum[j]: the sum of
//       q_j's codes; buf: kWidenFloats * 4 bytes of scratch, 64-aligned)
// with integer instructions (VNNI); otherwise its float scores() runs on the
// codes as floats.
constexpr int kQ8MaxHeadDim = 256;
template <class Ops>
concept HasQ8Dots = requires(const int8_t* const* q, const int* q_sum, const int8_t* k, float* const* s, uint8_t* b) {
  Ops::q8_scores(q, q_sum, 0, k, 0, 0, s, b);
};

// The integer scores one sum at a time, for head sizes an ISA's q8_scores
// loops do not take.
inline void q8_scores_one_by_one(const int8_t* const* q, int n_q, const int8_t* k, int span, int hd, float* const* s) {
  for (int j = 0; j < n_q; ++j)
    for (int t = 0; t < span; ++t) {
      int32_t dot = 0;
      for (int i = 0; i < hd; ++i) dot += q[j][i] * k[static_cast<size_t>(t) * hd + i];
      s[j][t] = static_cast<float>(dot);
    }
}

// q8_scores of an ISA with q8_dots<NQ>(q, k, n_t, hd, s, t0) for NQ = 2 and
// 1 over a block of keys, head_dim a multiple of `bytes` (else one by one).
template <class Ops>
void q8_scores_in_pairs(const int8_t* const* q, int n_q, const int8_t* k, int span, int hd, float* const* s,
                        int bytes) {
  if (hd % bytes != 0) {
    q8_scores_one_by_one(q, n_q, k, span, hd, s);
    return;
  }
  for (int t0 = 0; t0 < span; t0 += kAttnBlock) {
    const int n_t = std::min(kAttnBlock, span - t0);
    const int8_t* kb = k + static_cast<size_t>(t0) * hd;
    int j = 0;
    for (; j + 2 <= n_q; j += 2) Ops::template q8_dots<2>(q + j, kb, n_t, hd, s + j, t0);
    if (j < n_q) Ops::template q8_dots<1>(q + j, kb, n_t, hd, s + j, t0);
  }
}

// An ISA may supply scores_quad(q, k, n_t, hd, scale, s, t0): scores() for
// four queries at once, each score the same bits as scores() gives it, for
// every element type P scores() takes. (The test does not depend on P:
// clang looks Ops::scores_quad up where the driver is instantiated, so the
// branch that calls it must be discarded there, not in the generic lambda.)
template <class Ops>
concept HasScoreQuads = requires(const float* const* q, const float* k, float* const* s) {
  Ops::scores_quad(q, k, 0, 0, 1.0f, s, 0);
};

// An ISA's values() may take more than 2 queries at a time (kValueQueries);
// each output still sums its positions in order, so grouping changes no bit.
template <class Ops>
concept HasValueQueries = requires { Ops::kValueQueries; };

// k_scale / v_scale: the row scales of a q8 or q4 cache, null for fp16.
template <class Ops, class P>
void attention_heads_blocked(const AttentionQueries& qs, P k, const float* k_scale, P v, const float* v_scale, int hd,
                             float scale, float* scratch) {
  constexpr bool q8 = std::is_same_v<P, const int8_t*>;
  if (hd % lanes_needed<P>(Ops::kLanes) != 0 || (q8 && hd > kQ8MaxHeadDim)) {
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
  const bool widen = qs.n > 2 && hd <= kWidenFloats / 4 && Ops::template kWidenRows<P>;
  const int block = widen ? std::min(kAttnBlock, kWidenFloats / hd) : kAttnBlock;
  // (GCC cannot see that widen() writes every float a load then reads, and
  // warns "may be used uninitialized" in the inlined loads: a false alarm.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  alignas(64) float rows[kWidenFloats];
  // q8: the queries' codes, as bytes and (for float scores) as floats.
  alignas(64) int8_t q_code[q8 ? kMaxAttentionQueries * kQ8MaxHeadDim : 1];
  alignas(64) float q_int[q8 && !HasQ8Dots<Ops> ? kMaxAttentionQueries * kQ8MaxHeadDim : 1];
  const int8_t* q_codes[kMaxAttentionQueries];
  const float* q_ints[kMaxAttentionQueries];
  int q_sum[kMaxAttentionQueries];
  float q_factor[kMaxAttentionQueries];  // q_scale * scale
  const float* const* q = qs.q;
  float score_scale = scale;
  if constexpr (q8) {
    for (int j = 0; j < qs.n; ++j) {
      int8_t* c = q_code + static_cast<size_t>(j) * hd;
      float q_scale;
      quantize_row_q8(qs.q[j], c, &q_scale, hd);
      q_factor[j] = q_scale * scale;
      q_codes[j] = c;
      q_sum[j] = 0;
      for (int i = 0; i < hd; ++i) q_sum[j] += c[i];
      if constexpr (!HasQ8Dots<Ops>) {
        float* f = q_int + static_cast<size_t>(j) * hd;
        for (int i = 0; i < hd; ++i) f[i] = c[i];
        q_ints[j] = f;
      }
    }
    q = q_ints;
    score_scale = 1.0f;
  }
  // Scores for every query over the whole span (a query's positions outside
  // its own [first, n_ctx) are valid rows of other tokens; the mask drops them).
  // A widened block is read from the cache by widen() alone, with no
  // prefetch of its own; so while block b is used from L1, the driver
  // prefetches block b + 1 (after the last K block, V's first), a slice
  // after each call of the inner loops (a burst of the whole block at once
  // waited for fill buffers and gained ~1%). Measured on Sapphire Rapids
  // (AVX-512, 16 queries over 512 positions, 120 heads, one thread): 8.4 ms
  // without, 7.9 with.
  struct Prefetch {
    P next{};
    int rows = 0, done = 0, calls = 1, call = 0;
    void step(int hd) {
      const int upto = std::min(rows, static_cast<int>(static_cast<int64_t>(rows) * ++call / calls));
      for (; done < upto; ++done) prefetch_row(next + static_cast<size_t>(done) * hd, hd);
    }
  };
  // Calls of the inner loops per block: groups of `g` queries, then pairs, then one.
  auto calls_for = [&](int g) { return qs.n / g + qs.n % g / 2 + qs.n % g % 2; };
  int score_calls = calls_for(2), value_calls = calls_for(2);
  if constexpr (HasScoreQuads<Ops>) score_calls = calls_for(4);
  if constexpr (HasValueQueries<Ops>) value_calls = calls_for(Ops::kValueQueries);
  auto score_block = [&](auto kb, int n_t, int t0, Prefetch& pf) {
    int j = 0;
    if constexpr (HasScoreQuads<Ops>)
      for (; j + 4 <= qs.n; j += 4) Ops::scores_quad(q + j, kb, n_t, hd, score_scale, s + j, t0), pf.step(hd);
    for (; j + 2 <= qs.n; j += 2) Ops::template scores<2>(q + j, kb, n_t, hd, score_scale, s + j, t0), pf.step(hd);
    if (j < qs.n) Ops::template scores<1>(q + j, kb, n_t, hd, score_scale, s + j, t0), pf.step(hd);
  };
  auto next_block = [&](P base, int t0, int calls, bool keys) {
    Prefetch pf;
    pf.calls = calls;
    if (!widen) return pf;  // the inner loops prefetch the rows they read
    if (t0 + block < span) {
      pf.next = base + static_cast<size_t>(t0 + block) * hd;
      pf.rows = std::min(block, span - t0 - block);
    } else if (keys) {
      pf.next = v;
      pf.rows = std::min(block, span);
    }
    return pf;
  };
  if constexpr (q8 && HasQ8Dots<Ops>)
    Ops::q8_scores(q_codes, q_sum, qs.n, k, span, hd, s, reinterpret_cast<uint8_t*>(rows));
  for (int t0 = 0; t0 < span; t0 += block) {
    const int n_t = std::min(block, span - t0);
    const P kb = k + static_cast<size_t>(t0) * hd;
    Prefetch pf = next_block(k, t0, score_calls, true);
    if constexpr (q8 && HasQ8Dots<Ops>) {
      // scored above
    } else if (widen) {
      Ops::widen(kb, n_t * hd, rows);
      score_block(static_cast<const float*>(rows), n_t, t0, pf);
    } else {
      score_block(kb, n_t, t0, pf);
    }
    if constexpr (q8) {
      for (int j = 0; j < qs.n; ++j)
        for (int t = t0; t < t0 + n_t; ++t) s[j][t] = s[j][t] * q_factor[j] * k_scale[t];
    } else if (k_scale) {
      for (int j = 0; j < qs.n; ++j)
        for (int t = t0; t < t0 + n_t; ++t) s[j][t] *= k_scale[t];
    }
  }
  for (int j = 0; j < qs.n; ++j) {
    const int a = qs.first[j] - lo, b = qs.n_ctx[j] - lo;
    Ops::softmax(s[j] + a, b - a);
    std::fill(s[j], s[j] + a, 0.0f);  // the sliding window
    std::fill(s[j] + b, s[j] + span, 0.0f);  // the causal mask
    if (v_scale)
      for (int t = a; t < b; ++t) s[j][t] *= v_scale[t];
  }
  auto value_block = [&](auto vb, int n_t, int t0, Prefetch& pf) {
    int j = 0;
    if constexpr (HasValueQueries<Ops>)
      for (; j + Ops::kValueQueries <= qs.n; j += Ops::kValueQueries)
        Ops::template values<Ops::kValueQueries>(s + j, vb, n_t, hd, qs.out + j, t0, t0 == 0), pf.step(hd);
    for (; j + 2 <= qs.n; j += 2) Ops::template values<2>(s + j, vb, n_t, hd, qs.out + j, t0, t0 == 0), pf.step(hd);
    if (j < qs.n) Ops::template values<1>(s + j, vb, n_t, hd, qs.out + j, t0, t0 == 0), pf.step(hd);
  };
  for (int t0 = 0; t0 < span; t0 += block) {
    const int n_t = std::min(block, span - t0);
    const P vb = v + static_cast<size_t>(t0) * hd;
    Prefetch pf = next_block(v, t0, value_calls, false);
    if (widen) {
      Ops::widen(vb, n_t * hd, rows);
      value_block(static_cast<const float*>(rows), n_t, t0, pf);
    } else {
      value_block(vb, n_t, t0, pf);
    }
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

}  // namespace
}  // namespace pocket::kernels
