// matmul_multi (q/k/v and gate/up in one pass) must give exactly what
// separate matmul calls give, at every ISA level and thread count, whether
// the weights can be fused (same type, group, width) or not.
#include <gtest/gtest.h>

#include "kernels/table.h"
#include "util/thread_pool.h"
#include "weight_builders.h"

namespace pocket::kernels {
namespace {

using test::build_weight;
using test::BuiltWeight;

std::vector<float> random_input(int n, int64_t cols, uint64_t seed) {
  test::Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& e : x) e = rng.uniform(-2.0f, 2.0f);
  return x;
}

void expect_multi_matches_separate(const std::vector<BuiltWeight>& ws, int n) {
  const int64_t cols = ws[0].view.cols();
  const auto x = random_input(n, cols, 7 + n);
  for (Isa isa : supported_isas()) {
    const KernelTable& t = kernel_table(isa);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << isa_name(isa) << " threads " << threads << " n " << n);
      ThreadPool pool(threads);
      std::vector<std::vector<float>> fused(ws.size()), separate(ws.size());
      std::vector<MatmulTarget> targets;
      for (size_t i = 0; i < ws.size(); ++i) {
        fused[i].assign(static_cast<size_t>(n * ws[i].view.rows()), -1.0f);
        separate[i].assign(fused[i].size(), -2.0f);
        targets.push_back({&ws[i].view, fused[i].data()});
        matmul_with(t, ws[i].view, x.data(), n, separate[i].data(), &pool);
      }
      matmul_multi_with(t, targets, x.data(), n, &pool);
      for (size_t i = 0; i < ws.size(); ++i) EXPECT_EQ(fused[i], separate[i]) << "target " << i;  // bitwise
    }
  }
}

TEST(MatmulMulti, FusedPq4QkvShapesMatchSeparateCalls) {
  // Rows that are not multiples of the 16-row tile check the row-space
  // padding between targets.
  std::vector<BuiltWeight> ws;
  ws.push_back(build_weight(DType::PQ4, 64, 96, 32, 1));
  ws.push_back(build_weight(DType::PQ4, 40, 96, 32, 2));
  ws.push_back(build_weight(DType::PQ4, 17, 96, 32, 3));
  for (int n : {1, 2, 5}) expect_multi_matches_separate(ws, n);
}

TEST(MatmulMulti, FusedPq8AndQ8MatchSeparateCalls) {
  for (DType type : {DType::PQ8, DType::Q8_0, DType::F16}) {
    SCOPED_TRACE(dtype_name(type));
    std::vector<BuiltWeight> ws;
    ws.push_back(build_weight(type, 48, 64, 32, 11));
    ws.push_back(build_weight(type, 48, 64, 32, 12));
    for (int n : {1, 3}) expect_multi_matches_separate(ws, n);
  }
}

TEST(MatmulMulti, MixedTypesFallBackToSeparateCalls) {
  std::vector<BuiltWeight> ws;
  ws.push_back(build_weight(DType::PQ4, 32, 64, 32, 21));
  ws.push_back(build_weight(DType::Q4_0, 32, 64, 32, 22));
  ws.push_back(build_weight(DType::PQ4, 32, 64, 64, 23));  // another group size
  for (int n : {1, 4}) expect_multi_matches_separate(ws, n);
}

// Prefill-sized activations are quantized by the pool's threads (rows split
// among them); the products must not depend on how they were split.
TEST(MatmulThreads, PrefillSizedActivationsMatchTheSingleThreadResult) {
  const int n = 37;
  const int64_t cols = 1024;  // 37 x 1024 values: above the size quantized in parallel
  const auto x = random_input(n, cols, 99), other = random_input(n, cols, 100);
  for (DType type : {DType::PQ4, DType::PQ5, DType::Q8_0}) {
    const BuiltWeight w = build_weight(type, 48, cols, 64, 31);
    for (Isa isa : supported_isas()) {
      const KernelTable& t = kernel_table(isa);
      std::vector<float> alone(static_cast<size_t>(n * 48), -1.0f);
      matmul_with(t, w.view, x.data(), n, alone.data(), nullptr);
      for (int threads : {2, 3}) {
        SCOPED_TRACE(testing::Message() << dtype_name(type) << " " << isa_name(isa) << " threads " << threads);
        ThreadPool pool(threads);
        std::vector<float> y(alone.size(), -2.0f);
        // Another input first: a row left unquantized would keep its values.
        matmul_with(t, w.view, other.data(), n, y.data(), &pool);
        matmul_with(t, w.view, x.data(), n, y.data(), &pool);
        EXPECT_EQ(y, alone);  // bitwise
      }
    }
  }
}

}  // namespace
}  // namespace pocket::kernels
