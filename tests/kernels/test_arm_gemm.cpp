// The ARM PQ prefill GEMMs (arm_pq_gemm.h: dotprod, 8 rows x 4 tokens;
// kernels_i8mm.cpp: 4 rows x 8 tokens; both over batches of 16 tokens) at
// their edges: row counts that end inside a register block or a 16-row
// tile, token counts that end inside a block or a batch, every group size
// (one, two and four 32-column blocks per group, partial last groups), and
// thread splits. Each token's outputs must equal, bit for bit, those of the
// one-token path (the dotprod GEMV with the float steps of pq_tile), which
// test_matmul_exact.cpp checks against the integer-exact reference. Runs
// on every level this CPU supports (x86 levels too: the property holds for
// every level; under qemu-aarch64 on cortex-a76 and max it is the GEMMs').
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/table.h"
#include "util/thread_pool.h"
#include "weight_builders.h"

namespace pocket::kernels {
namespace {

TEST(ArmGemm, BlocksBatchesTailsAndThreadSplitsMatchTheOneTokenPath) {
  struct Shape {
    int64_t rows, cols;
    int group;
  };
  // rows: 4 (one i8mm block), 9 / 20 (inside the second 8- or 4-row block),
  // 40 (2.5 tiles); cols: partial last groups at 200 and 150.
  const Shape shapes[] = {{4, 96, 32}, {9, 200, 64}, {20, 256, 128}, {40, 150, 32}};
  // n: 2..3 (one block, short), 9 (two i8mm blocks + 1), 17 (a batch + 1), 38.
  const int ns[] = {2, 3, 9, 17, 38};
  for (Isa isa : supported_isas()) {
    const KernelTable& table = kernel_table(isa);
    for (DType type : {DType::PQ4, DType::PQ5, DType::PQ8}) {
      if (!table.matmul[static_cast<int>(type)].int8_acts) continue;
      for (const Shape& s : shapes) {
        const auto w = test::build_weight(type, s.rows, s.cols, s.group, 11 + s.rows);
        for (int n : ns) {
          const auto x = test::varied_activations(n, s.cols, 3 + n);
          std::vector<float> one(static_cast<size_t>(n * s.rows));
          for (int t = 0; t < n; ++t)
            matmul_with(table, w.view, x.data() + t * s.cols, 1, one.data() + t * s.rows, nullptr);
          for (int threads : {1, 3}) {
            SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " rows=" << s.rows
                                            << " cols=" << s.cols << " group=" << s.group << " n=" << n
                                            << " threads=" << threads);
            ThreadPool pool(threads);
            std::vector<float> all(one.size(), -1.0f);
            matmul_with(table, w.view, x.data(), n, all.data(), &pool);
            for (size_t i = 0; i < all.size(); ++i)
              if (std::memcmp(&all[i], &one[i], sizeof(float)) != 0) {
                ADD_FAILURE() << "token " << i / s.rows << " row " << i % s.rows << ": " << all[i] << " vs "
                              << one[i] << " one token at a time";
                break;
              }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pocket::kernels
