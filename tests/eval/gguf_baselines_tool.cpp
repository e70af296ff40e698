// Not a test: writes the GGUF Q4_0 / Q8_0 baselines of the quantization
// quality table (docs/benchmarks.md) with Pocket's writer and quantizer.
// Disabled by default; run with
//   POCKET_BASELINE_SRC=model POCKET_BASELINE_OUT=dir
//   pocket_tests_eval --gtest_also_run_disabled_tests --gtest_filter='*WriteGgufBaselines*'
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "eval/gguf_baseline.h"
#include "runtime/loader.h"

namespace pocket::eval {
namespace {

TEST(QualityTable, DISABLED_WriteGgufBaselines) {
  const char* src = std::getenv("POCKET_BASELINE_SRC");
  const char* out = std::getenv("POCKET_BASELINE_OUT");
  if (!src || !out) GTEST_SKIP() << "set POCKET_BASELINE_SRC and POCKET_BASELINE_OUT";
  for (DType type : {DType::Q4_0, DType::Q8_0}) {
    GgufBaselineOptions o;
    o.type = type;
    o.fallback = DType::Q8_0;  // falls back to F32 where the rows do not split into 32-blocks
    const std::string path = std::string(out) + "/" + (type == DType::Q4_0 ? "q4_0.gguf" : "q8_0.gguf");
    write_gguf_baseline(src, path, o);
    const WeightStats s = weight_stats(*load_model(path).file);
    std::printf("wrote %s: %.3f bits/weight\n", path.c_str(), s.bits_per_weight());
    for (const auto& t : s.by_type)
      std::printf("  %s: %d tensors, %lld weights\n", std::string(dtype_name(t.type)).c_str(), t.tensors,
                  static_cast<long long>(t.elements));
  }
}

}  // namespace
}  // namespace pocket::eval
