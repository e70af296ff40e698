// AArch64 i8mm level: PQ4/PQ8 prefill (n > 1) with smmla. One smmla
// multiplies a 2x8 int8 block of weights (two rows, 8 columns) by a 2x8
// block of activations (two tokens, same columns) into a 2x2 int32 block.
// In the PQ layout a 32-bit lane holds one row's 4 consecutive columns, so
// zipping the lanes of two 4-column chunks (PQ8), or of the low and high
// nibbles of one 8-column chunk (PQ4), gives the 2x8 weight operands of 4
// rows with two zips. Decode (n == 1) keeps the dotprod GEMV: half of every
// smmla would be wasted on a missing second token.
#include <arm_neon.h>

#include "kernels/arm_pq_kernels.h"
#include "kernels/arm_vec.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {

namespace {

struct NeonMmla {
  // 2 token pairs x 8 row pairs = 16 accumulator registers.
  static constexpr int kTokens = 4;

  template <bool Q4, int T>
  static void block(const uint8_t* data, const int8_t* const* x, int32x4_t (*out)[4]) {
    constexpr int P = (T + 1) / 2;  // token pairs; an odd last token pairs with zeros
    // acc[2i][p], acc[2i+1][p]: rows (4i, 4i+1), (4i+2, 4i+3) x tokens
    // (2p, 2p+1), lanes [r t, r t', r' t, r' t'].
    int32x4_t acc[8][P];
    for (auto& row : acc)
      for (auto& v : row) v = vdupq_n_s32(0);
    // Activation operand: 8 columns starting at k of tokens 2p and 2p+1.
    auto xop = [&](int p, int k) {
      const int8x8_t lo = vld1_s8(x[2 * p] + k);
      const int8x8_t hi = 2 * p + 1 < T ? vld1_s8(x[2 * p + 1] + k) : vdup_n_s8(0);
      return vcombine_s8(lo, hi);
    };
    auto mma4 = [&](int i, int32x4_t a, int32x4_t b, const int8x16_t* xv) {
      const int8x16_t w01 = vreinterpretq_s8_s32(vzip1q_s32(a, b));  // rows 4i, 4i+1 x 8 columns
      const int8x16_t w23 = vreinterpretq_s8_s32(vzip2q_s32(a, b));  // rows 4i+2, 4i+3
      for (int p = 0; p < P; ++p) {
        acc[2 * i][p] = vmmlaq_s32(acc[2 * i][p], w01, xv[p]);
        acc[2 * i + 1][p] = vmmlaq_s32(acc[2 * i + 1][p], w23, xv[p]);
      }
    };
    if constexpr (Q4) {
      for (int c = 0; c < 4; ++c) {  // chunk c: columns 8c..8c+7 (low nibbles 8c..8c+3)
        int8x16_t xv[P];
        for (int p = 0; p < P; ++p) xv[p] = xop(p, 8 * c);
        for (int i = 0; i < 4; ++i) {
          const uint8x16_t w = vld1q_u8(data + c * 64 + 16 * i);
          mma4(i, vreinterpretq_s32_u8(vandq_u8(w, vdupq_n_u8(0x0f))), vreinterpretq_s32_u8(vshrq_n_u8(w, 4)), xv);
        }
      }
    } else {
      for (int c = 0; c < 8; c += 2) {  // chunks c, c+1: columns 4c..4c+7
        int8x16_t xv[P];
        for (int p = 0; p < P; ++p) xv[p] = xop(p, 4 * c);
        for (int i = 0; i < 4; ++i)
          mma4(i, vreinterpretq_s32_u8(vld1q_u8(data + c * 64 + 16 * i)),
               vreinterpretq_s32_u8(vld1q_u8(data + (c + 1) * 64 + 16 * i)), xv);
      }
    }
    // Back to one vector of 4 rows per token: even lanes are token 2p.
    for (int p = 0; p < P; ++p)
      for (int i = 0; i < 4; ++i) {
        out[2 * p][i] = vuzp1q_s32(acc[2 * i][p], acc[2 * i + 1][p]);
        if (2 * p + 1 < T) out[2 * p + 1][i] = vuzp2q_s32(acc[2 * i][p], acc[2 * i + 1][p]);
      }
  }
};

template <bool Q4>
void matmul_pq_i8mm(const MatmulJob& job, int64_t r0, int64_t r1) {
  if (job.n == 1) return matmul_pq<NeonDot, Q4>(job, r0, r1);
  matmul_pq_arm<NeonMmla, Q4>(job, r0, r1);
}

}  // namespace

void install_i8mm(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq_i8mm<true>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq_i8mm<false>, true, pq::kTileRows};
}

}  // namespace pocket::kernels
