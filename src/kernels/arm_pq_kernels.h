// PQ4/PQ5/PQ8 matmul skeleton for AArch64 levels whose integer dot does not fit
// the one-row-per-lane traits of tiled_kernels.h: plain NEON (widening
// multiplies, kernels_neon.cpp) and i8mm (smmla on 2x8 operands,
// kernels_i8mm.cpp). A `Dot` policy computes, for one 32-column activation
// block and T tokens, the exact int32 dot of each of the tile's 16 rows;
// the float part below is the same sequence of operations per row and token
// as pq_tile in tiled_kernels.h, so every ARM level gives bit-identical
// results (integer sums are exact). Unnamed namespace: see x86_vec.h.
//
// Policy interface:
//   static constexpr int kTokens;   // largest token tile
//   template <int Q, int T>
//   static void block(const uint8_t* data, const int8_t* const* x, int32x4_t (*out)[4]);
//     data: the 32-column sub-block of the tile's group block (after the
//     scale header): 4 chunks (PQ4; PQ5 then its 64-byte plane) or 8 chunks
//     (PQ8) of 64 bytes; Q the code width (4, 5, 8).
//     x[t]: the token's 32 int8 activations. out[t][i]: rows 4i..4i+3.
#pragma once
#include <arm_neon.h>

#include <algorithm>

#include "kernels/arm_vec.h"
#include "kernels/prefetch.h"
#include "kernels/table.h"
#include "core/pq_format.h"

namespace pocket::kernels {
namespace {

inline float32x4_t arm_load_f16x4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

template <class Dot, int Q, int T>
void pq_tile_arm(const MatmulJob& job, const uint8_t* tile, int64_t row0, int t0) {
  const ActBlocks& a = *job.xq;
  const int g = job.group;
  const int subs = g / kActBlock;
  const int64_t groups = pq::groups_per_row(job.cols, g);
  const int64_t gbytes = pq::group_block_bytes(job.type, g);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  constexpr int sub_bytes = pq::sub_block_bytes(Q);
  float32x4_t acc[T][4];
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < 4; ++i) acc[t][i] = vdupq_n_f32(0.0f);
  for (int64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* blk = tile + gi * gbytes;
    float32x4_t gacc[T][4];
    float xsum[T];  // sum of the group's dequantized activations
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < 4; ++i) gacc[t][i] = vdupq_n_f32(0.0f);
      xsum[t] = 0.0f;
    }
    for (int sub = 0; sub < subs; ++sub) {
      const int64_t b = gi * subs + sub;
      const int8_t* x[T];
      for (int t = 0; t < T; ++t) x[t] = a.row(t0 + t) + b * kActBlock;
      int32x4_t iacc[T][4];
      if constexpr (T == 1) prefetch_weights(blk + hdr + sub * sub_bytes, sub_bytes);
      Dot::template block<Q, T>(blk + hdr + sub * sub_bytes, x, iacc);
      for (int t = 0; t < T; ++t) {
        const float32x4_t dx = vdupq_n_f32(a.scales(t0 + t)[b]);
        for (int i = 0; i < 4; ++i) gacc[t][i] = vfmaq_f32(gacc[t][i], vcvtq_f32_s32(iacc[t][i]), dx);
        xsum[t] += a.sums(t0 + t)[b];
      }
    }
    for (int i = 0; i < 4; ++i) {
      const float32x4_t s = arm_load_f16x4(blk + 8 * i);
      if constexpr (Q != 8) {
        // value = s * q + m: the offset m meets the activations' sum.
        const float32x4_t m = arm_load_f16x4(blk + 32 + 8 * i);
        for (int t = 0; t < T; ++t)
          acc[t][i] = vfmaq_f32(vfmaq_f32(acc[t][i], gacc[t][i], s), m, vdupq_n_f32(xsum[t]));
      } else {
        // The "+ (-0) * xsum" is pq_tile's zero bias correction, kept so that
        // even NaN/inf inputs propagate exactly as on the dotprod level.
        for (int t = 0; t < T; ++t)
          acc[t][i] = vfmaq_f32(acc[t][i], vfmaq_f32(gacc[t][i], vdupq_n_f32(-0.0f), vdupq_n_f32(xsum[t])), s);
      }
    }
  }
  const int64_t rows = job.rows;
  const int valid = static_cast<int>(std::min<int64_t>(pq::kTileRows, rows - row0));
  for (int t = 0; t < T; ++t) store_rows<4>(job.y + static_cast<int64_t>(t0 + t) * rows + row0, acc[t], valid);
}

// Token tiles of Dot::kTokens, then one smaller tile for the remainder.
template <class Dot, int Q, int T = Dot::kTokens - 1>
void pq_tail_arm(const MatmulJob& job, const uint8_t* tile, int64_t row0, int t0, int left) {
  if constexpr (T >= 1) {
    if (left == T) return pq_tile_arm<Dot, Q, T>(job, tile, row0, t0);
    pq_tail_arm<Dot, Q, T - 1>(job, tile, row0, t0, left);
  }
}

template <class Dot, int Q>
void matmul_pq_arm(const MatmulJob& job, int64_t r0, int64_t r1) {
  const int64_t tbytes = pq::tile_bytes(job.type, job.cols, job.group);
  constexpr int K = Dot::kTokens;
  for (int64_t row0 = r0 / pq::kTileRows * pq::kTileRows; row0 < r1; row0 += pq::kTileRows) {
    const uint8_t* tile = job.w + (row0 / pq::kTileRows) * tbytes;
    int t0 = 0;
    for (; t0 + K <= job.n; t0 += K) pq_tile_arm<Dot, Q, K>(job, tile, row0, t0);
    if (t0 < job.n) pq_tail_arm<Dot, Q>(job, tile, row0, t0, job.n - t0);
  }
}

}  // namespace
}  // namespace pocket::kernels
