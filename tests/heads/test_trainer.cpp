// The heads trainer: gradients against finite differences, recovery of a
// known linear rule, determinism across thread counts, metrics by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "common/test_util.h"
#include "heads/trainer.h"
#include "util/thread_pool.h"

namespace pocket::heads {
namespace {

// n rows of d features in [-1, 1] and labels argmax(W x + b) of a fixed random rule.
void linear_rule(int n, int d, int classes, uint64_t seed, Matrix& x, std::vector<int>& y) {
  test::Rng rule(99), rng(seed);
  std::vector<float> w(static_cast<size_t>(classes) * d);
  for (float& v : w) v = rule.uniform();
  x.rows = n, x.cols = d;
  x.data.resize(static_cast<size_t>(n) * d);
  y.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < d; ++k) x.row(i)[k] = rng.uniform();
    int best = 0;
    float bv = -1e30f;
    for (int c = 0; c < classes; ++c) {
      float s = 0;
      for (int k = 0; k < d; ++k) s += w[static_cast<size_t>(c) * d + k] * x.row(i)[k];
      if (s > bv) bv = s, best = c;
    }
    y[static_cast<size_t>(i)] = best;
  }
}

void gradient_check(int hidden) {
  Matrix x;
  std::vector<int> y;
  linear_rule(23, 5, 3, 1, x, y);
  Mlp net;
  net.init(5, hidden, 3, 7);
  test::Rng rng(3);
  for (float& v : net.w2) v = rng.uniform(-0.5f, 0.5f);  // a linear head starts at zero: move off it
  for (float& v : net.b2) v = rng.uniform(-0.5f, 0.5f);
  for (float& v : net.b1) v = rng.uniform(0.05f, 0.3f);  // keep ReLUs away from their kink
  const std::vector<float> cw = {0.5f, 1.0f, 2.0f};
  const float l2 = 0.03f;
  std::vector<int64_t> rows(23);
  std::iota(rows.begin(), rows.end(), 0);
  Mlp g;
  loss_and_grad(net, x, y, cw, l2, rows, &g, nullptr);
  auto check = [&](std::vector<float>& p, const std::vector<float>& gp, const char* what) {
    ASSERT_EQ(p.size(), gp.size()) << what;
    for (size_t k = 0; k < p.size(); ++k) {
      const float keep = p[k], h = 1e-2f;
      p[k] = keep + h;
      const double up = loss_and_grad(net, x, y, cw, l2, rows, nullptr, nullptr);
      p[k] = keep - h;
      const double down = loss_and_grad(net, x, y, cw, l2, rows, nullptr, nullptr);
      p[k] = keep;
      const double fd = (up - down) / (2.0 * h);
      // Central differences in float parameters: error O(h^2) plus rounding of ~1e-6 / h.
      EXPECT_NEAR(gp[k], fd, 2e-3 + 2e-2 * std::fabs(fd)) << what << "[" << k << "]";
    }
  };
  check(net.w2, g.w2, "w2");
  check(net.b2, g.b2, "b2");
  check(net.w1, g.w1, "w1");
  check(net.b1, g.b1, "b1");
}

TEST(HeadsTrainer, LinearGradientMatchesFiniteDifferences) { gradient_check(0); }
TEST(HeadsTrainer, MlpGradientMatchesFiniteDifferences) { gradient_check(4); }

TEST(HeadsTrainer, RecoversAKnownLinearRule) {
  Matrix x, xv, xt;
  std::vector<int> y, yv, yt;
  linear_rule(1500, 8, 4, 1, x, y);
  linear_rule(300, 8, 4, 2, xv, yv);
  linear_rule(1000, 8, 4, 3, xt, yt);
  TrainOptions o;
  o.l2 = 1e-5f;
  o.learning_rate = 3e-2f;
  o.max_epochs = 80;
  o.patience = 10;
  TrainResult r = train(x, y, 4, xv, yv, o, nullptr);
  Matrix z = logits(r.net, xt, nullptr);
  for (int64_t i = 0; i < z.rows; ++i) softmax(z.row(i), z.cols, r.temperature);
  const Metrics m = evaluate(z, yt, 4);
  EXPECT_GT(m.accuracy, 0.95) << "a separable linear rule on held-out data";
  EXPECT_GT(m.macro_f1, 0.93);
  EXPECT_LT(m.ece, 0.06);
  // A chance-level head would be near 0.25: the test can fail.
  EXPECT_GT(r.best_epoch, 1);
}

TEST(HeadsTrainer, IdenticalForAnyThreadCount) {
  Matrix x, xv;
  std::vector<int> y, yv;
  linear_rule(700, 12, 3, 4, x, y);
  linear_rule(100, 12, 3, 5, xv, yv);
  TrainOptions o;
  o.hidden = 16;
  o.max_epochs = 5;
  ThreadPool one(1), three(3);
  TrainResult a = train(x, y, 3, xv, yv, o, &one), b = train(x, y, 3, xv, yv, o, &three), c = train(x, y, 3, xv, yv, o, nullptr);
  EXPECT_EQ(a.net.w1, b.net.w1);
  EXPECT_EQ(a.net.w2, b.net.w2);
  EXPECT_EQ(a.net.b2, b.net.b2);
  EXPECT_EQ(a.net.w2, c.net.w2);
  EXPECT_EQ(a.temperature, b.temperature);
  o.seed = 2;  // and the seed matters
  TrainResult d = train(x, y, 3, xv, yv, o, &one);
  EXPECT_NE(a.net.w2, d.net.w2);
}

TEST(HeadsTrainer, TemperatureUndoesAScaledLogit) {
  // Logits whose calibrated temperature is known: a perfectly calibrated
  // model's logits multiplied by 3 need T = 3.
  test::Rng rng(11);
  Matrix z;
  z.rows = 4000, z.cols = 2;
  z.data.resize(8000);
  std::vector<int> y(4000);
  for (int i = 0; i < 4000; ++i) {
    const float s = rng.uniform(-3, 3);
    const double p1 = 1.0 / (1.0 + std::exp(-s));
    y[static_cast<size_t>(i)] = (rng.next() >> 11) * (1.0 / 9007199254740992.0) < p1 ? 1 : 0;
    z.row(i)[0] = 0, z.row(i)[1] = 3 * s;
  }
  EXPECT_NEAR(fit_temperature(z, y), 3.0, 0.35);
}

TEST(HeadsMetrics, AccuracyMacroF1AndEceByHand) {
  // truth 0,0,1,1 ; predicted 0,1,1,1 with confidences 0.9,0.6,0.8,0.7
  Matrix p;
  p.rows = 4, p.cols = 2;
  p.data = {0.9f, 0.1f, 0.4f, 0.6f, 0.2f, 0.8f, 0.3f, 0.7f};
  const Metrics m = evaluate(p, {0, 0, 1, 1}, 2, 10);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.75);
  // class 0: tp 1, fp 0, fn 1 -> F1 2/3; class 1: tp 2, fp 1, fn 0 -> F1 0.8
  EXPECT_NEAR(m.macro_f1, (2.0 / 3.0 + 0.8) / 2, 1e-12);
  // bins: 0.9 (right), 0.6 (wrong), 0.8 (right), 0.7 (right): |1-0.9|+|0-0.6|+|1-0.8|+|1-0.7| over 4
  EXPECT_NEAR(m.ece, (0.1 + 0.6 + 0.2 + 0.3) / 4, 1e-6);
  EXPECT_EQ(m.confusion[0][1], 1);
  EXPECT_EQ(m.confusion[1][1], 2);
}

}  // namespace
}  // namespace pocket::heads
