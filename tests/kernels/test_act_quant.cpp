// Activation quantization against a direct scalar transcription of its
// definition (std::nearbyint, clamping), on full, partial and padding
// blocks, with non-finite inputs, and reusing one buffer across shapes;
// every kernel level's own quantizer against the portable one, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "kernels/act_quant.h"
#include "kernels/table.h"
#include "util/error.h"

namespace pocket::kernels {
namespace {

// `scale_block` columns share one d (32, or 256 for the K-quant kernels).
void expect_matches_definition(const std::vector<float>& x, int n, int64_t cols, int64_t kpad, ActBlocks& a,
                               int scale_block = kActBlock) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " cols=" << cols << " kpad=" << kpad << " scale block "
                                  << scale_block);
  quantize_acts(x.data(), n, cols, kpad, a, scale_block);
  ASSERT_EQ(a.nb, kpad / kActBlock);
  ASSERT_EQ(a.scale_block, scale_block);
  for (int t = 0; t < n; ++t)
    for (int64_t b = 0; b < a.nb; ++b) {
      float amax = 0;
      const int64_t s0 = b * 32 / scale_block * scale_block;
      for (int64_t k = s0; k < std::min(cols, s0 + scale_block); ++k) {
        float v = std::fabs(x[t * cols + k]);
        if (v > amax) amax = v;  // NaN is skipped
      }
      const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
      ASSERT_EQ(a.scales(t)[b], d);
      int sum = 0, half[2] = {0, 0};
      for (int64_t k = b * 32; k < b * 32 + 32; ++k) {
        int want = 0;
        if (k < cols) {
          float r = x[t * cols + k] * inv;
          want = std::isnan(r) ? -127 : static_cast<int>(std::nearbyint(std::clamp(r, -127.0f, 127.0f)));
        }
        ASSERT_EQ(a.row(t)[k], want) << "t=" << t << " k=" << k;
        sum += want;
        half[(k / 16) % 2] += want;
      }
      ASSERT_EQ(a.sums(t)[b], d * static_cast<float>(sum));
      if (scale_block != kActBlock) {  // the integer sums of 16 columns (Q6_K's bias)
        EXPECT_EQ(a.sums16(t)[2 * b], half[0]) << "t=" << t << " b=" << b;
        EXPECT_EQ(a.sums16(t)[2 * b + 1], half[1]) << "t=" << t << " b=" << b;
      }
    }
  if (scale_block == kActBlock) {
    EXPECT_TRUE(a.h.empty());
  }
}

TEST(ActQuant, MatchesDefinition) {
  test::Rng rng(5);
  ActBlocks a;  // reused across calls, large then small then large
  for (auto [n, cols, kpad] : {std::tuple{3, 256, 256}, {1, 70, 128}, {2, 96, 96}, {4, 1000, 1024}, {1, 31, 64}}) {
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (auto& v : x) v = rng.uniform(-3.0f, 3.0f);
    expect_matches_definition(x, n, cols, kpad, a);
  }
}

// One scale per 256 columns: the amax is taken over the super-block (a
// partial one at the end of a row too), and kpad must hold whole ones.
TEST(ActQuant, SuperBlockScalesMatchDefinition) {
  test::Rng rng(6);
  ActBlocks a;
  for (auto [n, cols, kpad] : {std::tuple{3, 256, 256}, {2, 768, 768}, {1, 300, 512}, {4, 1024, 1024}}) {
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng.uniform(-3.0f, 3.0f) * (i % 97 == 0 ? 8.0f : 1.0f);
    expect_matches_definition(x, n, cols, kpad, a, 256);
  }
  std::vector<float> x(320, 1.0f);
  EXPECT_THROW(quantize_acts(x.data(), 1, 320, 320, a, 256), Error);  // 320 is not whole super-blocks
  EXPECT_THROW(quantize_acts(x.data(), 1, 320, 320, a, 64), Error);
}

TEST(ActQuant, TiesRoundToEvenAndNonFiniteStaysDefined) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // d = 1: the others quantize to themselves, ties to even
  x[1] = 2.5f, x[2] = -2.5f, x[3] = 3.5f, x[4] = 0.5f;
  x[32] = std::numeric_limits<float>::infinity();  // d = inf: codes 0 or NaN -> -127
  x[33] = 1.0f;
  x[40] = std::numeric_limits<float>::quiet_NaN();
  ActBlocks a;
  expect_matches_definition(x, 1, 64, 64, a);
  EXPECT_EQ(a.row(0)[1], 2);
  EXPECT_EQ(a.row(0)[2], -2);
  EXPECT_EQ(a.row(0)[3], 4);
  EXPECT_EQ(a.row(0)[4], 0);
}

// The block maximum is found wherever it sits (the x86 path keeps four
// running maxima over interleaved columns), with a NaN elsewhere in the
// block never winning: blocks of 32 and super-blocks of 256.
TEST(ActQuant, MaximumFoundAtEveryPositionBesideANaN) {
  ActBlocks a;
  for (int scale_block : {kActBlock, 256})
    for (int pos = 0; pos < scale_block; ++pos) {
      std::vector<float> x(scale_block);
      for (int k = 0; k < scale_block; ++k) x[k] = 0.01f * static_cast<float>(k % 13) - 0.06f;
      x[pos] = -50.0f;
      x[(pos + 37) % scale_block] = std::numeric_limits<float>::quiet_NaN();
      expect_matches_definition(x, 1, scale_block, scale_block, a, scale_block);
      ASSERT_EQ(a.scales(0)[0], 50.0f / 127.0f) << "max at " << pos;
    }
}

// Each level's KernelTable::quantize_act_rows (the one the matmuls use)
// gives the portable result bit for bit: codes, scales, sums and the
// 16-column sums, for rows split at any token, with values of every
// magnitude, zeros, signed zeros, infinities, NaN and denormals, on full,
// partial and padding blocks, with one scale per 32 or per 256 columns.
TEST(ActQuant, EveryLevelMatchesThePortableCode) {
  test::Rng rng(17);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.0f, -0.0f, inf, -inf, nan, 1e-40f, -3e-39f, 1e30f, -1e-30f, 2.5f, 127.0f};
  for (int scale_block : {kActBlock, 256})
    for (auto [n, cols] : {std::pair{5, 1024}, {3, 3072}, {2, 1000}, {1, 31}, {4, 96}, {3, 70}, {2, 256}})
      for (int pattern = 0; pattern < 3; ++pattern) {
        const int64_t kpad = (cols + scale_block - 1) / scale_block * scale_block;
        std::vector<float> x(static_cast<size_t>(n) * cols);
        for (size_t i = 0; i < x.size(); ++i) {
          float v = rng.uniform(-4.0f, 4.0f) * (i % 61 == 0 ? 40.0f : 1.0f);
          if (pattern == 1 && rng.next() % 9 == 0) v = specials[rng.next() % std::size(specials)];
          if (pattern == 2 && (i / 32) % 3 == 0) v = 0.0f;  // whole zero blocks: d = 0
          x[i] = v;
        }
        ActBlocks want;
        quantize_acts(x.data(), n, cols, kpad, want, scale_block);
        for (Isa isa : supported_isas()) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " scale block " << scale_block << " n=" << n
                                          << " cols=" << cols << " pattern " << pattern);
          const KernelTable& table = kernel_table(isa);
          ActBlocks got;
          prepare_acts(n, kpad, got, scale_block);
          std::fill(got.q.begin(), got.q.end(), int8_t{99});  // every code must be written
          table.quantize_act_rows(x.data(), 0, 1, cols, got);  // rows split unevenly
          table.quantize_act_rows(x.data(), 1, n, cols, got);
          ASSERT_EQ(got.q, want.q);
          ASSERT_EQ(got.h, want.h);
          for (size_t i = 0; i < want.d.size(); ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got.d[i]), std::bit_cast<uint32_t>(want.d[i])) << "block " << i;
            ASSERT_EQ(std::bit_cast<uint32_t>(got.s[i]), std::bit_cast<uint32_t>(want.s[i])) << "block " << i;
          }
        }
      }
}

}  // namespace
}  // namespace pocket::kernels
