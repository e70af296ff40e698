// Window planning and the per-position metrics, against direct computations.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "eval/metrics.h"
#include "eval/perplexity.h"
#include "util/error.h"

namespace pocket::eval {
namespace {

// Every predictable token is scored exactly once, with at least ctx - stride
// tokens of context after the first window, and windows fit in ctx.
void check_plan(int64_t n, int ctx, int stride, bool bos) {
  EvalOptions o;
  o.ctx = ctx;
  o.stride = stride;
  o.add_bos = bos;
  o.bos_id = bos ? 1 : -1;
  const auto windows = plan_windows(n, o);
  std::vector<int> scored(static_cast<size_t>(n), 0);
  const int64_t per_window = ctx - (bos ? 1 : 0);
  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    ASSERT_LE(w.end - w.begin, per_window);
    ASSERT_GE(w.first_target, w.begin + (bos ? 0 : 1));
    ASSERT_LT(w.first_target, w.end);
    for (int64_t j = w.first_target; j < w.end; ++j) {
      ++scored[static_cast<size_t>(j)];
      if (i > 0) {
        ASSERT_GE(j - w.begin, per_window - plan_stride(o)) << "token " << j << " lacks context";
      }
    }
  }
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(scored[static_cast<size_t>(j)], (j == 0 && !bos) ? 0 : 1) << "token " << j;
}

TEST(EvalWindows, EveryTokenScoredOnceWithContext) {
  for (bool bos : {false, true})
    for (int64_t n : {2, 3, 7, 64, 65, 100, 257, 1000})
      for (auto [ctx, stride] : std::vector<std::pair<int, int>>{{2, 0}, {8, 0}, {8, 8}, {16, 3}, {256, 0}, {64, 1}}) {
        SCOPED_TRACE(testing::Message() << "n " << n << " ctx " << ctx << " stride " << stride << " bos " << bos);
        check_plan(n, ctx, stride, bos);
      }
}

TEST(EvalWindows, LargestStrideLeavesNoTokenUnscored) {
  EvalOptions o;
  o.ctx = 10;
  o.stride = 10;  // clipped to 9: without BOS windows overlap by one token
  auto w = plan_windows(25, o);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].first_target, 1);
  EXPECT_EQ(w[1].begin, 9);
  EXPECT_EQ(w[1].first_target, 10);
  EXPECT_EQ(w[2].begin, 18);
  EXPECT_EQ(w[2].end, 25);
  o.add_bos = true;  // with BOS the text windows are disjoint
  o.bos_id = 1;
  w = plan_windows(25, o);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[1].begin, 9);
  EXPECT_EQ(w[1].first_target, 9);
}

TEST(EvalWindows, RejectsNothingToScoreAndBadOptions) {
  EvalOptions o;
  EXPECT_THROW(plan_windows(1, o), Error);
  EXPECT_THROW(plan_windows(0, o), Error);
  o.ctx = 1;
  EXPECT_THROW(plan_windows(10, o), Error);
  o.ctx = 8;
  o.add_bos = true;  // but no bos_id
  EXPECT_THROW(plan_windows(10, o), Error);
}

// Softmax written out directly, as the independent reference.
std::vector<double> softmax(const std::vector<float>& x) {
  double mx = x[0];
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  std::vector<double> p;
  double s = 0;
  for (float v : x) p.push_back(std::exp(v - mx)), s += p.back();
  for (double& v : p) v /= s;
  return p;
}

TEST(EvalMetrics, KlMatchesDirectSum) {
  const std::vector<float> a = {1.0f, 2.0f, -0.5f, 0.25f}, b = {0.5f, 2.5f, -1.0f, 1.0f};
  const auto p = softmax(a), q = softmax(b);
  double want = 0;
  for (size_t i = 0; i < p.size(); ++i) want += p[i] * std::log(p[i] / q[i]);
  EXPECT_NEAR(kl_divergence(a, b), want, 1e-12);
  EXPECT_EQ(kl_divergence(a, a), 0.0);
  // Shifting all logits changes no probability.
  std::vector<float> shifted = a;
  for (float& v : shifted) v += 1000.0f;
  EXPECT_NEAR(kl_divergence(a, shifted), 0.0, 1e-12);
  EXPECT_NEAR(log_sum_exp(shifted) - shifted[1], -std::log(p[1]), 1e-9);
}

TEST(EvalMetrics, ArgmaxQuantileAndPerplexity) {
  EXPECT_EQ(argmax(std::vector<float>{0.f, 3.f, 3.f, 1.f}), 1);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(quantile(v, 0.99), 99.0);
  EXPECT_EQ(quantile(v, 1.0), 100.0);
  EXPECT_EQ(quantile({}, 0.5), 0.0);
  NllSum s;
  s.add(std::log(4.0));
  s.add(std::log(16.0));
  EXPECT_NEAR(s.perplexity(), 8.0, 1e-12);  // geometric mean of 4 and 16
}

}  // namespace
}  // namespace pocket::eval
