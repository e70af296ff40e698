// Element-wise kernels at the inputs where a detail of the formula decides
// the result, every ISA level against direct double-precision formulas:
// RMSNorm where eps is not negligible next to mean(x^2), and softmax of
// logits large enough that exp overflows unless the maximum is subtracted
// first. test_ops.cpp covers typical inputs, where such details hide.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "kernels/table.h"

namespace pocket::kernels {
namespace {

std::vector<float> uniform_vec(int n, uint64_t seed, float lo, float hi) {
  test::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

// mean(x^2) from 1e-8 to 1e-4 around eps = 1e-6 (and eps = 1e-5): doubling
// eps, or dropping it, changes the output by 5% or more in most of these
// cases. Tolerance: relative 1e-5 of the output (float sums over n <= 1024).
TEST(OpsEdge, RmsnormEpsMattersForSmallInputs) {
  for (Isa isa : supported_isas()) {
    const KernelTable& t = kernel_table(isa);
    for (float eps : {1e-6f, 1e-5f})
      for (float scale : {1e-4f, 1e-3f, 1e-2f})
        for (int n : {5, 8, 37, 1024}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " eps=" << eps << " scale=" << scale << " n=" << n);
          auto x = uniform_vec(n, 7 + n, -scale, scale), w = uniform_vec(n, 9 + n, -2.0f, 2.0f);
          std::vector<float> out(static_cast<size_t>(n));
          t.rmsnorm(out.data(), x.data(), w.data(), n, eps);
          double ss = 0;
          for (float v : x) ss += static_cast<double>(v) * v;
          const double inv = 1.0 / std::sqrt(ss / n + eps);
          for (int i = 0; i < n; ++i) {
            const double want = x[i] * inv * w[i];
            ASSERT_NEAR(out[i], want, 1e-5 * std::fabs(want) + 1e-12) << "i=" << i;
          }
        }
  }
}

// Logits far above exp's range (up to 1e4, as a temperature-scaled or
// unnormalised head can give) and far below it; the result must be the
// softmax of x - max(x). Tolerance: 1e-5 relative plus 1e-9 absolute (the
// polynomial exp's error, and values below float's range flushing to 0).
TEST(OpsEdge, SoftmaxOfLargeLogitsSubtractsTheMaximum) {
  struct Range {
    float lo, hi;
  };
  for (Isa isa : supported_isas()) {
    const KernelTable& t = kernel_table(isa);
    for (Range r : {Range{50.0f, 150.0f}, Range{80.0f, 95.0f}, Range{-150.0f, -50.0f}, Range{9990.0f, 10000.0f}})
      for (int n : {1, 3, 8, 13, 64, 100}) {
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " logits in [" << r.lo << ", " << r.hi << "] n=" << n);
        auto x = uniform_vec(n, 3 + n, r.lo, r.hi), y = x;
        t.softmax(y.data(), n);
        double mx = x[0], z = 0;
        for (float v : x) mx = std::max(mx, static_cast<double>(v));
        for (float v : x) z += std::exp(v - mx);
        for (int i = 0; i < n; ++i) {
          const double want = std::exp(x[i] - mx) / z;
          ASSERT_NEAR(y[i], want, 1e-5 * want + 1e-9) << "i=" << i;
        }
      }
  }
}

}  // namespace
}  // namespace pocket::kernels
