// AArch64 i8mm level: PQ4/PQ5/PQ8 prefill (n > 1) with smmla. One smmla
// multiplies a 2x8 int8 block of weights (two rows, 8 columns) by a 2x8
// block of activations (two tokens, same columns) into a 2x2 int32 block,
// lanes [r t, r t', r' t, r' t']. In the PQ layout a 32-bit lane holds one
// row's 4 consecutive columns, so zipping the lanes of the low and high
// nibbles of one 8-column chunk (PQ4), or of two 4-column chunks (PQ8),
// gives the weight operands of 4 rows; the activations come interleaved in
// token pairs (GemmActs::kPairs, arm_pq_gemm.h), one operand per load.
//
// Register blocking: 4 rows x 8 tokens = 2 row pairs x 4 token pairs, 8
// registers each for the block's integer sums, the group's float sums and
// the output. The float steps stay in the 2x2 lane order (scales, offsets
// and activation sums are laid out to match) and are, per row and token,
// those of pq_tile (tiled_kernels.h): bit-identical to the dotprod level and
// to decode, which keeps the dotprod GEMV (n = 1: half of every smmla would
// be wasted on a missing second token).
#include <arm_neon.h>

#include "kernels/arm_pq_gemm.h"
#include "kernels/arm_vec.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {

namespace {

constexpr int kMmlaRows = 4;

// Broadcast pairs of lanes: [v0, v1, v0, v1] (pair 0) or [v2, v3, v2, v3].
template <int P>
POCKET_GEMM_INLINE inline float32x4_t pair_lanes(float32x4_t v) {
  return vreinterpretq_f32_f64(vdupq_laneq_f64(vreinterpretq_f64_f32(v), P));
}

// Rows [row0 + 4i, +4) x tokens [t0, t0 + ntok) (ntok <= 2P) of token tiles
// k and k + 1; SUBS = group / 32 blocks per weight group.
template <int Q, int P, int SUBS>
__attribute__((optimize("no-schedule-insns"))) void mmla_rows(const MatmulJob& job, const uint8_t* tile,
                                                               int64_t row0, int i, const GemmActs& xa, int k,
                                                               int t0, int ntok) {
  const int64_t groups = pq::groups_per_row(job.cols, job.group);
  const int64_t gbytes = pq::group_block_bytes(job.type, job.group);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  constexpr int sub_bytes = pq::sub_block_bytes(Q);
  constexpr int tiles = (P + 1) / 2;
  const int8_t* xq[tiles];
  const float* xd[tiles];
  const float* xs[tiles];
  for (int u = 0; u < tiles; ++u) xq[u] = xa.blocks(k + u), xd[u] = xa.scales(k + u), xs[u] = xa.sums(k + u);
  using Seq = std::make_integer_sequence<int, P>;
  float32x4_t acc[2][P];
  for (auto& v : acc)
    for (auto& a : v) a = vdupq_n_f32(0.0f);
  for (int64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* blk = tile + gi * gbytes;
    float32x4_t gacc[2][P];  // first product plain, as in arm_pq_gemm.h's gemm_rows
    auto block = [&]<int S>(std::integral_constant<int, S>) POCKET_GEMM_INLINE {
      const int64_t b = gi * SUBS + S;
      const uint8_t* data = blk + hdr + S * sub_bytes + 16 * i;
      int32x4_t iacc[2][P];
      for (auto& v : iacc)
        for (auto& a : v) a = vdupq_n_s32(0);
      [[maybe_unused]] uint8x16_t plane;  // PQ5: rows 4i..4i+3 of the fifth-bit plane
      if constexpr (Q == 5) plane = vld1q_u8(data + pq::kPlaneOffset);
      for (int o = 0; o < 4; ++o) {  // 8 columns each
        int32x4_t wa, wb;  // rows 4i..4i+3: columns 8o..8o+3 and 8o+4..8o+7
        if constexpr (Q != 8) {
          const uint8x16_t w = vld1q_u8(data + 64 * o);
          uint8x16_t l = vandq_u8(w, vdupq_n_u8(0x0f)), h = vshrq_n_u8(w, 4);
          if constexpr (Q == 5) l = arm_with_bit(l, plane, 2 * o), h = arm_with_bit(h, plane, 2 * o + 1);
          wa = vreinterpretq_s32_u8(l);
          wb = vreinterpretq_s32_u8(h);
        } else {
          wa = vreinterpretq_s32_u8(vld1q_u8(data + 128 * o));
          wb = vreinterpretq_s32_u8(vld1q_u8(data + 128 * o + 64));
        }
        const int8x16_t w01 = vreinterpretq_s8_s32(vzip1q_s32(wa, wb));  // rows 4i, 4i+1
        const int8x16_t w23 = vreinterpretq_s8_s32(vzip2q_s32(wa, wb));  // rows 4i+2, 4i+3
        [&]<int... p>(std::integer_sequence<int, p...>) POCKET_GEMM_INLINE {
          ((iacc[0][p] = vmmlaq_s32(iacc[0][p], w01, vld1q_s8(xq[p / 2] + b * 128 + 16 * (2 * o + p % 2)))), ...);
          ((iacc[1][p] = vmmlaq_s32(iacc[1][p], w23, vld1q_s8(xq[p / 2] + b * 128 + 16 * (2 * o + p % 2)))), ...);
        }(Seq{});
      }
      float32x4_t dx[P];  // [d(2p), d(2p+1), d(2p), d(2p+1)]
      for (int u = 0; u < tiles; ++u) {
        const float32x4_t d = vld1q_f32(xd[u] + 4 * b);
        dx[2 * u] = pair_lanes<0>(d);
        if (2 * u + 1 < P) dx[2 * u + 1] = pair_lanes<1>(d);
      }
      for (int r = 0; r < 2; ++r)
        for (int p = 0; p < P; ++p)
          gacc[r][p] = S == 0 ? vmulq_f32(vcvtq_f32_s32(iacc[r][p]), dx[p])
                              : vfmaq_f32(gacc[r][p], vcvtq_f32_s32(iacc[r][p]), dx[p]);
    };
    [&]<int... S>(std::integer_sequence<int, S...>) POCKET_GEMM_INLINE {
      (block(std::integral_constant<int, S>{}), ...);
    }(std::make_integer_sequence<int, SUBS>{});
    float32x4_t xsum[P];  // the group's activation sums, pair lanes, added in block order from zero
    for (int u = 0; u < tiles; ++u) {
      float32x4_t v = vaddq_f32(vdupq_n_f32(0.0f), vld1q_f32(xs[u] + 4 * gi * SUBS));
      for (int sub = 1; sub < SUBS; ++sub) v = vaddq_f32(v, vld1q_f32(xs[u] + 4 * (gi * SUBS + sub)));
      xsum[2 * u] = pair_lanes<0>(v);
      if (2 * u + 1 < P) xsum[2 * u + 1] = pair_lanes<1>(v);
    }
    // Row scales (and PQ4 offsets) in the 2x2 lane order: [s(r), s(r), s(r'), s(r')].
    const float32x4_t s4 = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(blk + 8 * i)));
    const float32x4_t s[2] = {vzip1q_f32(s4, s4), vzip2q_f32(s4, s4)};
    if constexpr (Q != 8) {
      const float32x4_t m4 = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(blk + 32 + 8 * i)));
      const float32x4_t m[2] = {vzip1q_f32(m4, m4), vzip2q_f32(m4, m4)};
      for (int r = 0; r < 2; ++r)
        for (int p = 0; p < P; ++p) acc[r][p] = vfmaq_f32(vfmaq_f32(acc[r][p], gacc[r][p], s[r]), m[r], xsum[p]);
    } else {
      // + (-0) * xsum: pq_tile's zero bias correction (NaN/inf propagate as there).
      for (int r = 0; r < 2; ++r)
        for (int p = 0; p < P; ++p)
          acc[r][p] = vfmaq_f32(acc[r][p], vfmaq_f32(gacc[r][p], vdupq_n_f32(-0.0f), xsum[p]), s[r]);
    }
  }
  // Back to 4 rows per token: even lanes are token 2p, odd lanes 2p + 1.
  const int64_t rows = job.rows, first = row0 + kMmlaRows * i;
  const int valid = static_cast<int>(std::min<int64_t>(kMmlaRows, rows - first));
  for (int p = 0; p < P; ++p)
    for (int e = 0; e < 2 && 2 * p + e < ntok; ++e) {
      const float32x4_t v = e == 0 ? vuzp1q_f32(acc[0][p], acc[1][p]) : vuzp2q_f32(acc[0][p], acc[1][p]);
      store_rows<1>(job.y + static_cast<int64_t>(t0 + 2 * p + e) * rows + first, &v, valid);
    }
}

// 4-row blocks, token tiles of 8 (two GemmActs tiles; the last one shorter).
template <int Q>
struct MmlaGemm {
  static constexpr int kRows = kMmlaRows;
  static constexpr GemmActs::Layout kLayout = GemmActs::kPairs;
  template <int SUBS>
  static void rows(const MatmulJob& job, const uint8_t* tile, int64_t row0, int i, const GemmActs& xa, int b0,
                   int count) {
    for (int k = 0; k * kGemmTokens < count; k += 2) {
      const int ntok = std::min(2 * kGemmTokens, count - kGemmTokens * k);
      const int t0 = b0 + kGemmTokens * k;
      switch ((ntok + 1) / 2) {
        case 4: mmla_rows<Q, 4, SUBS>(job, tile, row0, i, xa, k, t0, ntok); break;
        case 3: mmla_rows<Q, 3, SUBS>(job, tile, row0, i, xa, k, t0, ntok); break;
        case 2: mmla_rows<Q, 2, SUBS>(job, tile, row0, i, xa, k, t0, ntok); break;
        default: mmla_rows<Q, 1, SUBS>(job, tile, row0, i, xa, k, t0, ntok); break;
      }
    }
  }
};

template <int Q>
void matmul_pq_i8mm(const MatmulJob& job, int64_t r0, int64_t r1) {
  if (job.n == 1) return matmul_pq<NeonDot, Q>(job, r0, r1);
  pq_gemm<MmlaGemm<Q>>(job, r0, r1);
}

}  // namespace

void install_i8mm(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq_i8mm<4>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ5)] = {matmul_pq_i8mm<5>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq_i8mm<8>, true, pq::kTileRows};
}

}  // namespace pocket::kernels
