// PQ4/PQ5/PQ8 prefill GEMM for AArch64 with the dot-product extension (n > 1):
// the dotprod level's kernel (below) and what the i8mm level's smmla GEMM
// (kernels_i8mm.cpp) shares with it: the interleaved activations
// (GemmActs), the batch / group-size / row-block driver (pq_gemm) and the
// row stores. The PQ layout (core/pq_format.h)
// already is an interleaved row-block layout: a 16-byte register of a
// 64-byte chunk holds 4 rows x 4 columns. So `sdot` by element multiplies it
// by 4 columns of one token taken from a lane of a 16-column activation
// register: no activation broadcasts, each activation load serves 16 sdots
// and each unpacked weight register serves every token of the tile. No
// repacking at load: the file's bytes are the kernel's operands (mmap-able).
//
// Register blocking: half a 16-row tile (8 rows = 2 registers) x 4 tokens,
// so the integer sums of the current 32-column block (8 registers), the
// group's float sums (8) and the output accumulators (8) all stay in
// registers with the activations (4) and weights (2) of one chunk.
//
// The float part is the same sequence of operations per row and token as
// pq_tile (tiled_kernels.h) and pq_tile_arm (arm_pq_kernels.h), on exact
// integer sums, so the result is bit-identical to the decode path (n = 1)
// and to the other ARM levels (tests: Matmul.ArmPqLevelsAgreeBitwise,
// BatchInvariance.*). Compiles only in translation units built with
// +dotprod. Unnamed namespace: see x86_vec.h.
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/pq_format.h"
#include "kernels/arm_vec.h"
#include "kernels/table.h"

namespace pocket::kernels {
namespace {

// The unrolled loops below are lambdas over index packs; they must inline.
#define POCKET_GEMM_INLINE __attribute__((always_inline))

constexpr int kGemmRows = 8;     // rows per register block (2 registers)
constexpr int kGemmTokens = 4;   // tokens per register block (the lanes of an activation register)
constexpr int kGemmBatch = 16;   // tokens interleaved at a time (each pass streams the weights once)

// A batch of up to kGemmBatch tokens' quantized activations, interleaved by
// token tile of 4: for tile k and block b, 128 bytes. Layout kLanes (sdot):
// bytes 16j..16j+15 are columns 4j..4j+3 of the tile's 4 tokens (token t in
// lane t), so one sdot by element serves a weight register and one token.
// Layout kPairs (smmla, kernels_i8mm.cpp): bytes 16(2o+p)..+15 are columns
// 8o..8o+7 of tokens 2p and 2p+1, one smmla operand. A tile's block scales
// and sums are 4 floats (token t in lane t). Missing tokens are zeros.
struct GemmActs {
  int64_t nb = 0;  // blocks per row
  std::vector<int8_t> q;
  std::vector<float> d, s;

  const int8_t* blocks(int k) const { return q.data() + static_cast<int64_t>(k) * nb * 128; }
  const float* scales(int k) const { return d.data() + static_cast<int64_t>(k) * nb * 4; }
  const float* sums(int k) const { return s.data() + static_cast<int64_t>(k) * nb * 4; }

  enum Layout { kLanes, kPairs };

  // Tokens [t0, t0 + count) of `a`.
  void fill(const ActBlocks& a, int t0, int count, Layout layout = kLanes) {
    nb = a.nb;
    const int tiles = (count + kGemmTokens - 1) / kGemmTokens;
    q.assign(static_cast<size_t>(tiles * nb * 128), 0);
    d.assign(static_cast<size_t>(tiles * nb * 4), 0.0f);
    s.assign(d.size(), 0.0f);
    for (int k = 0; k < tiles; ++k) {
      const int8_t* x[kGemmTokens];
      const int8x16_t zero = vdupq_n_s8(0);
      for (int t = 0; t < kGemmTokens; ++t) x[t] = kGemmTokens * k + t < count ? a.row(t0 + kGemmTokens * k + t) : nullptr;
      int8_t* out = q.data() + static_cast<int64_t>(k) * nb * 128;
      for (int64_t c = 0; c < nb * 2; ++c) {  // 16 columns
        int32x4_t v[kGemmTokens];
        for (int t = 0; t < kGemmTokens; ++t) v[t] = vreinterpretq_s32_s8(x[t] ? vld1q_s8(x[t] + 16 * c) : zero);
        auto lo64 = [](int32x4_t p, int32x4_t r) {
          return vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(p), vreinterpretq_s64_s32(r)));
        };
        auto hi64 = [](int32x4_t p, int32x4_t r) {
          return vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(p), vreinterpretq_s64_s32(r)));
        };
        if (layout == kPairs) {  // octets 2c and 2c+1 of pairs 0 and 1
          vst1q_s8(out + 64 * c, lo64(v[0], v[1]));
          vst1q_s8(out + 64 * c + 16, lo64(v[2], v[3]));
          vst1q_s8(out + 64 * c + 32, hi64(v[0], v[1]));
          vst1q_s8(out + 64 * c + 48, hi64(v[2], v[3]));
          continue;
        }
        // kLanes: a 4x4 transpose of 32-bit words.
        const int32x4_t a01 = vtrn1q_s32(v[0], v[1]), b01 = vtrn2q_s32(v[0], v[1]);
        const int32x4_t a23 = vtrn1q_s32(v[2], v[3]), b23 = vtrn2q_s32(v[2], v[3]);
        vst1q_s8(out + 64 * c, lo64(a01, a23));
        vst1q_s8(out + 64 * c + 16, lo64(b01, b23));
        vst1q_s8(out + 64 * c + 32, hi64(a01, a23));
        vst1q_s8(out + 64 * c + 48, hi64(b01, b23));
      }
      for (int t = 0; t < kGemmTokens; ++t)
        if (x[t])
          for (int64_t b = 0; b < nb; ++b) {
            d[(k * nb + b) * 4 + t] = a.scales(t0 + kGemmTokens * k + t)[b];
            s[(k * nb + b) * 4 + t] = a.sums(t0 + kGemmTokens * k + t)[b];
          }
    }
  }
};

// Integer dots of one 32-column block for rows [8h, 8h + 8) of the tile and
// T tokens: iacc[t][j] holds rows 8h + 4j .. 8h + 4j + 3 of token t.
// `data` is the block's chunks (PQ4: 4 x 64 bytes of 8 nibble columns, low
// nibbles the first 4; PQ5: the same, then the 64-byte plane of fifth bits;
// PQ8: 8 x 64 bytes of 4 byte columns); `x` the block's 8 interleaved
// activation registers.
template <int Q, int T>
POCKET_GEMM_INLINE inline void gemm_block_dot(const uint8_t* data, int h, const int8_t* x, int32x4_t (*iacc)[2]) {
  [[maybe_unused]] uint8x16_t plane0, plane1;
  if constexpr (Q == 5) {
    plane0 = vld1q_u8(data + pq::kPlaneOffset + 32 * h);
    plane1 = vld1q_u8(data + pq::kPlaneOffset + 32 * h + 16);
  }
  auto chunk = [&]<int C>(std::integral_constant<int, C>) POCKET_GEMM_INLINE {
    const uint8_t* p = data + C * 64 + 32 * h;
    const uint8x16_t w0 = vld1q_u8(p), w1 = vld1q_u8(p + 16);
    auto dots = [&]<int J>(std::integral_constant<int, J>, int8x16_t v0, int8x16_t v1) POCKET_GEMM_INLINE {
      const int8x16_t xv = vld1q_s8(x + 16 * J);  // 4 columns x 4 tokens
      [&]<int... t>(std::integer_sequence<int, t...>) POCKET_GEMM_INLINE {
        ((iacc[t][0] = vdotq_laneq_s32(iacc[t][0], v0, xv, t)), ...);
        ((iacc[t][1] = vdotq_laneq_s32(iacc[t][1], v1, xv, t)), ...);
      }(std::make_integer_sequence<int, T>{});
    };
    if constexpr (Q != 8) {
      const uint8x16_t mask = vdupq_n_u8(0x0f);
      uint8x16_t l0 = vandq_u8(w0, mask), l1 = vandq_u8(w1, mask), h0 = vshrq_n_u8(w0, 4), h1 = vshrq_n_u8(w1, 4);
      if constexpr (Q == 5) {
        l0 = arm_with_bit(l0, plane0, 2 * C), l1 = arm_with_bit(l1, plane1, 2 * C);
        h0 = arm_with_bit(h0, plane0, 2 * C + 1), h1 = arm_with_bit(h1, plane1, 2 * C + 1);
      }
      dots(std::integral_constant<int, 2 * C>{}, vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1));
      dots(std::integral_constant<int, 2 * C + 1>{}, vreinterpretq_s8_u8(h0), vreinterpretq_s8_u8(h1));
    } else {
      dots(std::integral_constant<int, C>{}, vreinterpretq_s8_u8(w0), vreinterpretq_s8_u8(w1));
    }
  };
  [&]<int... C>(std::integer_sequence<int, C...>) POCKET_GEMM_INLINE {
    (chunk(std::integral_constant<int, C>{}), ...);
  }(std::make_integer_sequence<int, Q != 8 ? 4 : 8>{});
}

// Rows [row0 + 8h, row0 + 8h + 8) x tokens [t0, t0 + T) of token tile k;
// SUBS = group / 32 blocks per weight group, unrolled.
template <int Q, int T, int SUBS>
__attribute__((optimize("no-schedule-insns"))) void gemm_rows(const MatmulJob& job, const uint8_t* tile,
                                                               int64_t row0, int h, const GemmActs& xa, int k,
                                                               int t0) {
  const int64_t groups = pq::groups_per_row(job.cols, job.group);
  const int64_t gbytes = pq::group_block_bytes(job.type, job.group);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  constexpr int sub_bytes = pq::sub_block_bytes(Q);
  const int8_t* xq = xa.blocks(k);
  const float* xd = xa.scales(k);
  const float* xs = xa.sums(k);
  using Seq = std::make_integer_sequence<int, T>;
  float32x4_t acc[T][2];
  for (auto& v : acc) v[0] = v[1] = vdupq_n_f32(0.0f);
  for (int64_t gi = 0; gi < groups; ++gi, xq += SUBS * 128, xd += SUBS * 4, xs += SUBS * 4) {
    const uint8_t* blk = tile + gi * gbytes;
    // The group's sums of scaled block dots. pq_tile starts them at +0 and
    // adds each product with an fma; here the first is a plain product,
    // which differs only in the sign of a zero (-0 for +0), and no sign of
    // a zero reaches the output: an output sum starts at +0 and a sum can
    // only turn -0 when both terms are -0.
    float32x4_t gacc[T][2];
    auto block = [&]<int S>(std::integral_constant<int, S>) POCKET_GEMM_INLINE {
      int32x4_t iacc[T][2];
      for (auto& v : iacc) v[0] = v[1] = vdupq_n_s32(0);
      gemm_block_dot<Q, T>(blk + hdr + S * sub_bytes, h, xq + S * 128, iacc);
      const float32x4_t dx = vld1q_f32(xd + 4 * S);
      [&]<int... t>(std::integer_sequence<int, t...>) POCKET_GEMM_INLINE {
        if constexpr (S == 0) {
          ((gacc[t][0] = vmulq_laneq_f32(vcvtq_f32_s32(iacc[t][0]), dx, t)), ...);
          ((gacc[t][1] = vmulq_laneq_f32(vcvtq_f32_s32(iacc[t][1]), dx, t)), ...);
        } else {
          ((gacc[t][0] = vfmaq_laneq_f32(gacc[t][0], vcvtq_f32_s32(iacc[t][0]), dx, t)), ...);
          ((gacc[t][1] = vfmaq_laneq_f32(gacc[t][1], vcvtq_f32_s32(iacc[t][1]), dx, t)), ...);
        }
      }(Seq{});
    };
    [&]<int... S>(std::integer_sequence<int, S...>) POCKET_GEMM_INLINE {
      (block(std::integral_constant<int, S>{}), ...);
    }(std::make_integer_sequence<int, SUBS>{});
    // The group's dequantized activation sums, token t in lane t, added in
    // block order from zero as pq_tile does.
    float32x4_t xsum = vaddq_f32(vdupq_n_f32(0.0f), vld1q_f32(xs));
    for (int sub = 1; sub < SUBS; ++sub) xsum = vaddq_f32(xsum, vld1q_f32(xs + 4 * sub));
    for (int j = 0; j < 2; ++j) {
      const int i = 2 * h + j;  // 4-row register of the 16-row tile
      const float32x4_t s = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(blk + 8 * i)));
      if constexpr (Q != 8) {
        const float32x4_t m = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(blk + 32 + 8 * i)));
        [&]<int... t>(std::integer_sequence<int, t...>) POCKET_GEMM_INLINE {
          ((acc[t][j] = vfmaq_laneq_f32(vfmaq_f32(acc[t][j], gacc[t][j], s), m, xsum, t)), ...);
        }(Seq{});
      } else {
        // + (-0) * xsum: pq_tile's zero bias correction (NaN/inf propagate as there).
        [&]<int... t>(std::integer_sequence<int, t...>) POCKET_GEMM_INLINE {
          ((acc[t][j] = vfmaq_f32(acc[t][j], vfmaq_laneq_f32(gacc[t][j], vdupq_n_f32(-0.0f), xsum, t), s)), ...);
        }(Seq{});
      }
    }
  }
  const int64_t rows = job.rows, first = row0 + kGemmRows * h;
  const int valid = static_cast<int>(std::min<int64_t>(kGemmRows, rows - first));
  for (int t = 0; t < T; ++t) store_rows<2>(job.y + static_cast<int64_t>(t0 + t) * rows + first, acc[t], valid);
}

// The driver shared by the dotprod and i8mm GEMMs: batches of kGemmBatch
// tokens interleaved in Kernel::kLayout, the group size made a constant
// (32, 64, 128: pq_format.h), then every Kernel::kRows-row block of the
// 16-row tiles of [r0, r1) through
//   Kernel::template rows<SUBS>(job, tile, row0, block, xa, b0, count)
// which runs all `count` tokens of the batch (from token b0) on that block.
template <class Kernel, int SUBS>
void pq_gemm_pass(const MatmulJob& job, int64_t r0, int64_t r1, const GemmActs& xa, int b0, int count) {
  const int64_t tbytes = pq::tile_bytes(job.type, job.cols, job.group);
  for (int64_t row0 = r0 / pq::kTileRows * pq::kTileRows; row0 < r1; row0 += pq::kTileRows) {
    const uint8_t* tile = job.w + (row0 / pq::kTileRows) * tbytes;
    for (int blk = 0; blk < pq::kTileRows / Kernel::kRows && row0 + Kernel::kRows * blk < job.rows; ++blk)
      Kernel::template rows<SUBS>(job, tile, row0, blk, xa, b0, count);
  }
}

template <class Kernel>
void pq_gemm(const MatmulJob& job, int64_t r0, int64_t r1) {
  GemmActs xa;
  for (int b0 = 0; b0 < job.n; b0 += kGemmBatch) {
    const int count = std::min(kGemmBatch, job.n - b0);
    xa.fill(*job.xq, b0, count, Kernel::kLayout);
    switch (job.group / kActBlock) {
      case 1: pq_gemm_pass<Kernel, 1>(job, r0, r1, xa, b0, count); break;
      case 2: pq_gemm_pass<Kernel, 2>(job, r0, r1, xa, b0, count); break;
      default: pq_gemm_pass<Kernel, 4>(job, r0, r1, xa, b0, count); break;
    }
  }
}

// The dotprod GEMM: 8-row blocks, token tiles of 4 (the last one shorter).
template <int Q>
struct DotGemm {
  static constexpr int kRows = kGemmRows;
  static constexpr GemmActs::Layout kLayout = GemmActs::kLanes;
  template <int SUBS>
  static void rows(const MatmulJob& job, const uint8_t* tile, int64_t row0, int h, const GemmActs& xa, int b0,
                   int count) {
    for (int k = 0; k * kGemmTokens < count; ++k) {
      const int t0 = b0 + kGemmTokens * k;
      switch (std::min(kGemmTokens, count - kGemmTokens * k)) {
        case 4: gemm_rows<Q, 4, SUBS>(job, tile, row0, h, xa, k, t0); break;
        case 3: gemm_rows<Q, 3, SUBS>(job, tile, row0, h, xa, k, t0); break;
        case 2: gemm_rows<Q, 2, SUBS>(job, tile, row0, h, xa, k, t0); break;
        default: gemm_rows<Q, 1, SUBS>(job, tile, row0, h, xa, k, t0); break;
      }
    }
  }
};

template <int Q>
void matmul_pq_gemm(const MatmulJob& job, int64_t r0, int64_t r1) {
  pq_gemm<DotGemm<Q>>(job, r0, r1);
}

}  // namespace
}  // namespace pocket::kernels
