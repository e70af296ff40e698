// AArch64 dotprod level of the q8-cache attention: the integer scores
// (HasQ8Dots in attention_impl.h) with sdot, signed bytes on both sides,
// so the query and key codes multiply as stored. The rest of the attention,
// and the fp16 and q4 caches, are the baseline NEON loops.
#include "kernels/attention_neon.h"
#include "kernels/table.h"

namespace pocket::kernels {

namespace {

struct AttentionOpsDotprod : AttentionOpsNeon {
  // Four positions per step and NQ (1 or 2) queries, as the float scores():
  // one pairwise-add tree turns 4 accumulators into 4 scores. A short last
  // step repeats its last row; integers make every grouping give the same
  // scores anyway.
  template <int NQ>
  static void q8_dots(const int8_t* const* q, const int8_t* k, int n_t, int hd, float* const* s, int t0) {
    for (int t = 0; t < n_t; t += 4) {
      const int valid = std::min(4, n_t - t);
      int32x4_t acc[NQ][4];
      for (int j = 0; j < NQ; ++j)
        for (int p = 0; p < 4; ++p) acc[j][p] = vdupq_n_s32(0);
      const int8_t* kt = k + static_cast<size_t>(t) * hd;
      const int8_t* rows[4];
      for (int p = 0; p < 4; ++p) rows[p] = kt + std::min(p, valid - 1) * hd;
      for (int p = 0; p < 4; ++p) prefetch_row(kt + (kAttnPrefetchRows + p) * hd, hd);
      for (int d = 0; d < hd; d += 16) {
        int8x16_t qd[NQ];
        for (int j = 0; j < NQ; ++j) qd[j] = vld1q_s8(q[j] + d);
        for (int p = 0; p < 4; ++p) {
          const int8x16_t kv = vld1q_s8(rows[p] + d);
          for (int j = 0; j < NQ; ++j) acc[j][p] = vdotq_s32(acc[j][p], qd[j], kv);
        }
      }
      for (int j = 0; j < NQ; ++j) {
        const float32x4_t r =
            vcvtq_f32_s32(vpaddq_s32(vpaddq_s32(acc[j][0], acc[j][1]), vpaddq_s32(acc[j][2], acc[j][3])));
        store_lanes(s[j] + t0 + t, r, valid);
      }
    }
  }

  static void q8_scores(const int8_t* const* q, const int*, int n_q, const int8_t* k, int span, int hd,
                        float* const* s, uint8_t*) {
    q8_scores_in_pairs<AttentionOpsDotprod>(q, n_q, k, span, hd, s, 16);
  }
};

void attention_heads_q8_dotprod(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int hd, float scale,
                                float* scratch) {
  attention_heads_blocked<AttentionOpsDotprod>(qs, k.q, k.scale, v.q, v.scale, hd, scale, scratch);
}

}  // namespace

void install_dotprod_attention(KernelTable& t) { t.attention_heads_q8 = attention_heads_q8_dotprod; }

}  // namespace pocket::kernels
