// Activation quantization against a direct scalar transcription of its
// definition (std::nearbyint, clamping), on full, partial and padding
// blocks, with non-finite inputs, and reusing one buffer across shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "kernels/act_quant.h"

namespace pocket::kernels {
namespace {

void expect_matches_definition(const std::vector<float>& x, int n, int64_t cols, int64_t kpad, ActBlocks& a) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " cols=" << cols << " kpad=" << kpad);
  quantize_acts(x.data(), n, cols, kpad, a);
  ASSERT_EQ(a.nb, kpad / kActBlock);
  for (int t = 0; t < n; ++t)
    for (int64_t b = 0; b < a.nb; ++b) {
      float amax = 0;
      for (int64_t k = b * 32; k < std::min(cols, b * 32 + 32); ++k) {
        float v = std::fabs(x[t * cols + k]);
        if (v > amax) amax = v;  // NaN is skipped
      }
      const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
      ASSERT_EQ(a.scales(t)[b], d);
      int sum = 0;
      for (int64_t k = b * 32; k < b * 32 + 32; ++k) {
        int want = 0;
        if (k < cols) {
          float r = x[t * cols + k] * inv;
          want = std::isnan(r) ? -127 : static_cast<int>(std::nearbyint(std::clamp(r, -127.0f, 127.0f)));
        }
        ASSERT_EQ(a.row(t)[k], want) << "t=" << t << " k=" << k;
        sum += want;
      }
      ASSERT_EQ(a.sums(t)[b], d * static_cast<float>(sum));
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

}  // namespace
}  // namespace pocket::kernels
