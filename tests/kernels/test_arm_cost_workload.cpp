// The workload of the ARM cost test (tools/qemu/arm_cost_test.sh, a ctest of
// the aarch64 cross build): the q4 (PQ4, group 64) matmuls of one
// transformer layer of a small shape (dim 512, 8 query / 4 KV heads of 64,
// FFN 1536), single-threaded on the level the CPU selects, for
// POCKET_ARM_COST_TOKENS prefilled tokens. The script runs it under
// qemu-aarch64 with the instruction-count plugin at two token counts and
// bounds the difference per token. Weights come from build_weight (one
// thread, deterministic), so the counts are exact. Without the variable the
// test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kernels/isa.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"

namespace pocket::kernels {
namespace {

TEST(ArmCost, PrefillWorkload) {
  const char* env = std::getenv("POCKET_ARM_COST_TOKENS");
  if (env == nullptr) GTEST_SKIP() << "the workload of tools/qemu/arm_cost_test.sh (set POCKET_ARM_COST_TOKENS)";
  const int n = std::atoi(env);
  ASSERT_TRUE(n >= 1 && n <= 128) << "POCKET_ARM_COST_TOKENS=" << env;
  struct Shape {
    int64_t rows, cols;
  };
  // q, k, v, o, gate, up, down.
  const Shape shapes[] = {{512, 512}, {256, 512}, {256, 512}, {512, 512}, {1536, 512}, {1536, 512}, {512, 1536}};
  const KernelTable& table = kernel_table(selected_isa());
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    const auto w = test::build_weight(DType::PQ4, s.rows, s.cols, 64, seed++);
    // Activations of the largest count, so making them costs the same at every n.
    const auto x = test::varied_activations(128, s.cols, seed++);
    std::vector<float> y(static_cast<size_t>(n * s.rows));
    matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace pocket::kernels
