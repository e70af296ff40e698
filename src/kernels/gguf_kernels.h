// Matmul kernels for llama.cpp's row-major GGUF block types, used in place:
// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (blocks of 32) and the K-quants Q4_K, Q5_K, Q6_K
// (super-blocks of 256), written once against 32-element block traits
// (X86Blocks in x86_vec.h, ArmMullBlocks / ArmDotBlocks in arm_vec.h) and
// instantiated by every SIMD level. Unnamed namespace: see x86_vec.h.
//
// Activations arrive as int8 blocks of 32 (act_quant.h), one scale dx[b]
// and one dequantized sum S[b] = dx[b] * sum(q) per block. Every format's
// sub-blocks are 32 or 16 elements inside one such block, so per weight
// block b and token:
//   value = s * code + o  (s, o per sub-block: Q4_0 d, -8d; Q5_0 d, -16d;
//                          Q4_1/Q5_1 d, m; Q4_K/Q5_K d*sc, -dmin*m)
//   y += (s * dx[b]) * dot(code, q)  +  o * S[b]
// with the integer dot computed by the traits and the offsets summed apart.
// For the K-quants the activations share one scale per super-block
// (MatmulEntry::act_scale_block = 256, as llama.cpp's Q8_K), so the integer
// sub-block scales (Q4_K/Q5_K 6-bit, Q6_K int8 per 16 elements) multiply
// the integer dots, the super-block's dots are summed exactly, and one
// conversion and fma per super-block and token remain:
//   y += (d * dx) * sum_j sc_j * dot_j  -  sum_j dmin * m_j * S[b_j]
// The weight codes of a block are unpacked once and used by every token of
// the tile (tiled_kernels.h: for_token_tiles).
//
// Block traits interface (W: 32 int8 codes, D: int32 partial sums of one
// block, A: float partial sums):
//   kS8Bias                 dot_s8 computes sum((code + kS8Bias) * q)
//   half(p)                 the fp16 at p
//   load32(p), nibbles16(p) 32 bytes; Q4_0's 16 bytes as 32 nibble codes
//   bits32_to_16(p)         bit j of the little-endian uint32 at p as 0x10 in byte j
//   low4(w), high4(w)       the nibbles of each byte
//   bit_to_16<S>(qh)        ((qh >> S) & 1) << 4 per byte
//   pair_to_48<S>(qh)       ((qh >> S) & 3) << 4 per byte
//   or_(a, b), minus32(w)
//   dot_u(w, q)             codes 0..31
//   dot_s8(w, q)            codes -128..127 (plus kS8Bias * sum(q))
//   k_scales(b)             a super-block's 8 scale bytes (little-endian in b)
//   scale16<j>(s)           scale j of those, as dot_u_acc takes it
//   dot_u_acc(acc, w, q, s) acc + sc * dot(w, q), codes 0..63, sc -128..127
//   q6_scales(sc)           the 8 int8 scales of one half of a Q6_K super-block
//   scale16_pair<k>(s)      scales 2k and 2k + 1 of those, as dot_s16_acc (and,
//                           with kQ6Unsigned, dot_u_acc) takes them
//   dot_s16_acc(acc, w, q, s)  codes -32..31: acc + lo * dot(first 16) + hi * dot(last 16)
//   kQ6Unsigned             Q6_K codes stay 0..63 for dot_u_acc, and then
//   q6_all_scales(sc)       all 16 scales of a super-block, for
//   q6_bias(all, h)         -32 * sum_j sc_j * h[j] (h: 16 activation sums)
//   dzero(), dadd(a, b)     int32 partial sums
//   zero(), fma(d, s, acc)  acc + s * float(d)
//   add(a, b), hsum(acc)
// and eight floats F8 (one per activation block of a K-quant super-block):
//   bytes_to_f8(b, s)       the 8 bytes of b (little-endian) as floats, times s
//   load8, fma8(a, b, c) = a * b + c, zero8, hsum8
#pragma once
#include <algorithm>
#include <utility>

#include "kernels/gguf_layout.h"
#include "kernels/prefetch.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {
namespace {

template <DType D>
constexpr bool kSmallBlock =
    D == DType::Q4_0 || D == DType::Q4_1 || D == DType::Q5_0 || D == DType::Q5_1 || D == DType::Q8_0;
template <DType D>
constexpr int kGgufElems = kSmallBlock<D> ? 32 : 256;
template <DType D>
constexpr int kGgufBytes = D == DType::Q4_0   ? 18
                           : D == DType::Q4_1 ? 20
                           : D == DType::Q5_0 ? 22
                           : D == DType::Q5_1 ? 24
                           : D == DType::Q8_0 ? 34
                           : D == DType::Q4_K ? 144
                           : D == DType::Q5_K ? 176
                                              : 210;  // Q6_K

// Calls f(std::integral_constant<int, I>) for I = 0..N-1, so shift counts
// stay compile-time constants (NEON's immediate shifts need them).
template <class F, int... I>
inline void unroll_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
inline void unroll(F&& f) {
  unroll_impl(f, std::make_integer_sequence<int, N>{});
}

template <class B, DType Type, int T>
void gguf_row(const MatmulJob& job, int64_t r, int t0) {
  using W = typename B::W;
  constexpr int kBlocks = kGgufElems<Type> / 32;  // activation blocks per weight block
  const ActBlocks& a = *job.xq;
  const int64_t nsb = job.cols / kGgufElems<Type>;
  const uint8_t* row = job.w + r * nsb * kGgufBytes<Type>;
  // Independent accumulators per token so a decode GEMV (T = 1) is not one
  // long chain of dependent fmas: a 32-block type's block j of each step of eight
  // goes to acc[t][j % kChains]; the K-quants add once per super-block
  // (acc[t][0]) and keep two integer chains inside it instead. The same
  // number of chains for every tile size keeps the summation order of a
  // token independent of the batch it is in (decode, speculative verify and
  // prefill give bit-identical rows); two chains per token still fit the
  // registers at T = 4.
  constexpr int kChains = 2;
  typename B::A acc[T][kChains];
  float corr[T][kChains];  // sums of -offset * S[b] (32-element blocks), subtracted at the end
  typename B::F8 corr8[T];  // the same, eight blocks at a time (K-quants)
  for (int t = 0; t < T; ++t) {
    for (auto& a_t : acc[t]) a_t = B::zero();
    for (float& c : corr[t]) c = 0.0f;
    corr8[t] = B::zero8();
  }
  const int8_t* xq[T];
  const float* dx[T];
  const float* xs[T];
  const int16_t* xh[T];  // sums of 16 columns (K-quant activations only)
  for (int t = 0; t < T; ++t) xq[t] = a.row(t0 + t), dx[t] = a.scales(t0 + t), xs[t] = a.sums(t0 + t);
  if constexpr (Type == DType::Q6_K)
    for (int t = 0; t < T; ++t) xh[t] = a.sums16(t0 + t);

  if constexpr (kSmallBlock<Type>) {
    // Blocks of 32, eight per step so the accumulators rotate as for the
    // K-quants. Every type starts with d (fp16); then Q4_0: 16 bytes
    // (element j low nibble, j + 16 high), value d * (code - 8); Q4_1: m,
    // the nibbles, value d * code + m; Q5_0: qh (uint32, bit j the fifth bit
    // of element j), the nibbles, value d * (code - 16); Q5_1: m, qh, the
    // nibbles, value d * code + m; Q8_0: 32 int8 codes, value d * code.
    // The offsets go to corr as offset * S[b], negated (y = dots - corr).
    for (int64_t b0 = 0; b0 < nsb; b0 += 8) {
      if constexpr (T == 1) prefetch_weights(row + b0 * kGgufBytes<Type>, 8 * kGgufBytes<Type>);
      unroll<8>([&](auto j) {
        const int64_t b = b0 + j;
        if (b >= nsb) return;
        const uint8_t* blk = row + b * kGgufBytes<Type>;
        const float d = B::half(blk);
        W w;
        float neg_offset;  // -offset of the values: value = d * code - neg_offset
        if constexpr (Type == DType::Q4_0) {
          w = B::nibbles16(blk + 2), neg_offset = 8.0f * d;
        } else if constexpr (Type == DType::Q4_1) {
          w = B::nibbles16(blk + 4), neg_offset = -B::half(blk + 2);
        } else if constexpr (Type == DType::Q5_0) {
          w = B::or_(B::nibbles16(blk + 6), B::bits32_to_16(blk + 2)), neg_offset = 16.0f * d;
        } else if constexpr (Type == DType::Q5_1) {
          w = B::or_(B::nibbles16(blk + 8), B::bits32_to_16(blk + 4)), neg_offset = -B::half(blk + 2);
        } else {  // Q8_0; dot_s8 adds kS8Bias to every code
          w = B::load32(blk + 2), neg_offset = static_cast<float>(B::kS8Bias) * d;
        }
        for (int t = 0; t < T; ++t) {
          auto& a = acc[t][j % kChains];
          const auto dot = Type == DType::Q8_0 ? B::dot_s8(w, xq[t] + b * 32) : B::dot_u(w, xq[t] + b * 32);
          a = B::fma(dot, d * dx[t][b], a);
          corr[t][j % kChains] += neg_offset * xs[t][b];
        }
      });
    }
  } else {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = row + sb * kGgufBytes<Type>;
      if constexpr (T == 1) prefetch_weights(blk, kGgufBytes<Type>);
      const int64_t b0 = sb * kBlocks;
      if constexpr (Type == DType::Q4_K || Type == DType::Q5_K) {
        // d, dmin, scales[12], (Q5_K: qh[32]), qs[128]: bytes 32p..32p+31 of
        // qs hold sub-block 2p in the low nibbles and 2p + 1 in the high ones;
        // bit j of qh[l] is the fifth bit of element l of sub-block j.
        constexpr bool kFive = Type == DType::Q5_K;
        // Activations share one scale per super-block (act_scale_block
        // 256), so the sub-block scales multiply the integer dots and a
        // super-block's eight dots are summed as integers (two chains per
        // token); the mins' correction m * S[b] is one vector product.
        uint64_t scales, mins;
        kquant_scales_mins(blk + 4, scales, mins);
        const typename B::F8 m = B::bytes_to_f8(mins, B::half(blk + 2));
        typename B::D isum[T][2];
        for (int t = 0; t < T; ++t) {
          corr8[t] = B::fma8(m, B::load8(xs[t] + b0), corr8[t]);
          isum[t][0] = isum[t][1] = B::dzero();
        }
        const auto sub_scales = B::k_scales(scales);
        const uint8_t* qs = blk + (kFive ? 48 : 16);
        W qh{};
        if constexpr (kFive) qh = B::load32(blk + 16);
        unroll<4>([&](auto p) {
          const W q = B::load32(qs + 32 * p);
          W lo = B::low4(q), hi = B::high4(q);
          if constexpr (kFive) {
            lo = B::or_(lo, B::template bit_to_16<2 * p>(qh));
            hi = B::or_(hi, B::template bit_to_16<2 * p + 1>(qh));
          }
          const auto s0 = B::template scale16<2 * p>(sub_scales);
          const auto s1 = B::template scale16<2 * p + 1>(sub_scales);
          for (int t = 0; t < T; ++t) {
            isum[t][0] = B::dot_u_acc(isum[t][0], lo, xq[t] + (b0 + 2 * p) * 32, s0);
            isum[t][1] = B::dot_u_acc(isum[t][1], hi, xq[t] + (b0 + 2 * p + 1) * 32, s1);
          }
        });
        const float d = B::half(blk);
        for (int t = 0; t < T; ++t)
          acc[t][0] = B::fma(B::dadd(isum[t][0], isum[t][1]), d * dx[t][b0], acc[t][0]);
      } else {  // Q6_K
        // ql[128], qh[64], scales[16] (int8), d. In each half of 128
        // elements, activation block k (0..3) takes the low (k < 2) or high
        // nibbles of ql[32 (k % 2) ..] and bit pair k of qh[..]; codes are
        // biased by 32 and sub-blocks of 16 have their own scale.
        // With B::kQ6Unsigned the codes stay 0..63 (one unsigned dot, no
        // sign handling per token) and the bias comes off once per token:
        // sum_j sc_j * dot(code_j - 32, q_j) = sum_j sc_j * dot(code_j, q_j)
        // - 32 * sum_j sc_j * h_j, h_j the activation sum of sub-block j.
        const float d = B::half(blk + 208);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        typename B::D isum[T][2];  // as for Q4_K: one activation scale per super-block
        for (int t = 0; t < T; ++t) isum[t][0] = isum[t][1] = B::dzero();
        if constexpr (B::kQ6Unsigned) {
          const auto all_scales = B::q6_all_scales(sc);
          for (int t = 0; t < T; ++t) isum[t][0] = B::q6_bias(all_scales, xh[t] + sb * 16);
        }
        unroll<2>([&](auto h) {
          const W ql0 = B::load32(blk + 64 * h), ql1 = B::load32(blk + 64 * h + 32);
          const W qh = B::load32(blk + 128 + 32 * h);
          const auto half_scales = B::q6_scales(sc + 8 * h);
          unroll<4>([&](auto k) {
            const W nib = k < 2 ? B::low4(k % 2 ? ql1 : ql0) : B::high4(k % 2 ? ql1 : ql0);
            const W code = B::or_(nib, B::template pair_to_48<2 * k>(qh));
            const int64_t b = b0 + 4 * h + k;
            const auto s = B::template scale16_pair<k>(half_scales);
            for (int t = 0; t < T; ++t) {
              auto& is = isum[t][k % 2];
              if constexpr (B::kQ6Unsigned)
                is = B::dot_u_acc(is, code, xq[t] + b * 32, s);
              else
                is = B::dot_s16_acc(is, B::minus32(code), xq[t] + b * 32, s);
            }
          });
        });
        for (int t = 0; t < T; ++t)
          acc[t][0] = B::fma(B::dadd(isum[t][0], isum[t][1]), d * dx[t][b0], acc[t][0]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    typename B::A sum = acc[t][0];
    float offsets = corr[t][0];
    for (int c = 1; c < kChains; ++c) sum = B::add(sum, acc[t][c]), offsets += corr[t][c];
    job.y[static_cast<int64_t>(t0 + t) * job.rows + r] = B::hsum(sum) - (offsets + B::hsum8(corr8[t]));
  }
}

// A row is one tile of the weights, so every row reads all the tokens'
// activations again: tokens go in chunks of kGgufTokenChunk (e.g. 32 KB of
// int8 activations at 1024 columns) that stay in the near caches while the
// rows pass over them, instead of streaming n * cols bytes from L2/L3 per
// row. The order does not change any result (rows and tokens independent).
constexpr int kGgufTokenChunk = 32;

template <class B, DType Type>
void matmul_gguf(const MatmulJob& job, int64_t r0, int64_t r1) {
  for (int c0 = 0; c0 < job.n; c0 += kGgufTokenChunk) {
    const int cn = std::min(kGgufTokenChunk, job.n - c0);
    for (int64_t r = r0; r < r1; ++r)
      for_token_tiles(cn, [&]<int T>(int t0) { gguf_row<B, Type, T>(job, r, c0 + t0); });
  }
}

// Installs the GGUF block kernels of one level.
template <class B>
void install_gguf_matmul(KernelTable& t) {
  // The K-quants want one activation scale per super-block of 256.
  auto set = [&](DType d, MatmulFn fn, int act_scale_block) {
    t.matmul[static_cast<int>(d)] = {fn, true, 1, act_scale_block};
  };
  set(DType::Q4_0, matmul_gguf<B, DType::Q4_0>, kActBlock);
  set(DType::Q4_1, matmul_gguf<B, DType::Q4_1>, kActBlock);
  set(DType::Q5_0, matmul_gguf<B, DType::Q5_0>, kActBlock);
  set(DType::Q5_1, matmul_gguf<B, DType::Q5_1>, kActBlock);
  set(DType::Q8_0, matmul_gguf<B, DType::Q8_0>, kActBlock);
  set(DType::Q4_K, matmul_gguf<B, DType::Q4_K>, 256);
  set(DType::Q5_K, matmul_gguf<B, DType::Q5_K>, 256);
  set(DType::Q6_K, matmul_gguf<B, DType::Q6_K>, 256);
}

}  // namespace
}  // namespace pocket::kernels
