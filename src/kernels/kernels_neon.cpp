// Baseline AArch64 (no dotprod) PQ4/PQ5/PQ8, GGUF block (Q4_0, Q8_0, Q4_K,
// Q5_K, Q6_K) and float (F32, F16, BF16) matmul, so cores like cortex-a53
// do not drop to the scalar reference; the dotprod and i8mm levels keep the
// float kernels. Without sdot the int8 dot is a widening multiply-accumulate
// into int16 lanes (smlal), widened to int32 (sadalp / addp) before it could
// overflow. Results are bit-identical to the dotprod level (see
// arm_pq_kernels.h and ArmMullBlocks in arm_vec.h).
#include <arm_neon.h>

#include <cstring>

#include "kernels/arm_pq_kernels.h"
#include "kernels/arm_vec.h"
#include "kernels/float_kernels.h"
#include "kernels/gguf_kernels.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

// The 4 activation bytes at x repeated in every 32-bit lane: each lane
// holds one row's 4 consecutive columns (core/pq_format.h).
inline int8x16_t bcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

struct NeonMull {
  // Two tokens keep the accumulators (8 registers per token) and one chunk's
  // weights within the 32 vector registers.
  static constexpr int kTokens = 2;

  template <int Q, int T>
  static void block(const uint8_t* data, const int8_t* const* x, int32x4_t (*out)[4]) {
    if constexpr (Q != 8) {
      // acc[t][2i]: rows 4i, 4i+1; acc[t][2i+1]: rows 4i+2, 4i+3; 4 column
      // lanes per row. A lane sums 8 products code (<= 31) x activation
      // (|x| <= 127, act_quant.h clamps): at most 31496, fits int16.
      int16x8_t acc[T][8];
      for (int t = 0; t < T; ++t)
        for (auto& v : acc[t]) v = vdupq_n_s16(0);
      for (int c = 0; c < 4; ++c) {  // 4 chunks x 8 columns
        int8x16_t lo[4], hi[4];
        for (int i = 0; i < 4; ++i) {
          const uint8x16_t w = vld1q_u8(data + c * 64 + 16 * i);
          uint8x16_t l = vandq_u8(w, vdupq_n_u8(0x0f)), h = vshrq_n_u8(w, 4);
          if constexpr (Q == 5) {
            const uint8x16_t plane = vld1q_u8(data + pq::kPlaneOffset + 16 * i);
            l = arm_with_bit(l, plane, 2 * c);
            h = arm_with_bit(h, plane, 2 * c + 1);
          }
          lo[i] = vreinterpretq_s8_u8(l);
          hi[i] = vreinterpretq_s8_u8(h);
        }
        for (int t = 0; t < T; ++t) {
          const int8x16_t xl = bcast4(x[t] + 8 * c), xh = bcast4(x[t] + 8 * c + 4);
          for (int i = 0; i < 4; ++i) {
            acc[t][2 * i] = vmlal_s8(acc[t][2 * i], vget_low_s8(lo[i]), vget_low_s8(xl));
            acc[t][2 * i + 1] = vmlal_high_s8(acc[t][2 * i + 1], lo[i], xl);
            acc[t][2 * i] = vmlal_s8(acc[t][2 * i], vget_low_s8(hi[i]), vget_low_s8(xh));
            acc[t][2 * i + 1] = vmlal_high_s8(acc[t][2 * i + 1], hi[i], xh);
          }
        }
      }
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < 4; ++i)
          out[t][i] = vpaddq_s32(vpaddlq_s16(acc[t][2 * i]), vpaddlq_s16(acc[t][2 * i + 1]));
    } else {
      // acc[t][2i]: rows 4i, 4i+1 with two partial-sum lanes per row (same
      // for 2i+1 and rows 4i+2, 4i+3). Two chunks' products share an int16
      // lane: |q| <= 128, |x| <= 127, so at most 32512.
      int32x4_t acc[T][8];
      for (int t = 0; t < T; ++t)
        for (auto& v : acc[t]) v = vdupq_n_s32(0);
      for (int c = 0; c < 8; c += 2) {  // pairs of chunks of 4 columns
        int8x16_t w0[4], w1[4];
        for (int i = 0; i < 4; ++i) {
          w0[i] = vld1q_s8(reinterpret_cast<const int8_t*>(data + c * 64 + 16 * i));
          w1[i] = vld1q_s8(reinterpret_cast<const int8_t*>(data + (c + 1) * 64 + 16 * i));
        }
        for (int t = 0; t < T; ++t) {
          const int8x16_t x0 = bcast4(x[t] + 4 * c), x1 = bcast4(x[t] + 4 * c + 4);
          for (int i = 0; i < 4; ++i) {
            const int16x8_t pl =
                vmlal_s8(vmull_s8(vget_low_s8(w0[i]), vget_low_s8(x0)), vget_low_s8(w1[i]), vget_low_s8(x1));
            const int16x8_t ph = vmlal_high_s8(vmull_high_s8(w0[i], x0), w1[i], x1);
            acc[t][2 * i] = vpadalq_s16(acc[t][2 * i], pl);
            acc[t][2 * i + 1] = vpadalq_s16(acc[t][2 * i + 1], ph);
          }
        }
      }
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < 4; ++i) out[t][i] = vpaddq_s32(acc[t][2 * i], acc[t][2 * i + 1]);
    }
  }
};

}  // namespace

void install_neon_matmul(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq_arm<NeonMull, 4>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ5)] = {matmul_pq_arm<NeonMull, 5>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq_arm<NeonMull, 8>, true, pq::kTileRows};
  install_gguf_matmul<ArmMullBlocks>(t);
  install_float_matmul<NeonFloat>(t);
}

}  // namespace pocket::kernels
