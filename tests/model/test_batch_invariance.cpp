// Batch invariance of the forward pass: a position's logits must be
// bit-identical whether it runs as a one-token decode step, inside a
// k-token speculative verify block, or inside a prefill batch. Greedy
// speculative decoding is lossless only because of this. The test runs on
// whatever kernel level the CPU (or emulator) selects, so test.sh's qemu
// stages check AVX2 and the NEON levels.
#include <gtest/gtest.h>

#include <cstring>

#include "common/test_util.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

struct Case {
  std::string preset;
  DType type;
  KVType kv = KVType::F16;
};

class BatchInvariance : public ::testing::TestWithParam<Case> {};

// Runs `tokens` after a `head`-token prefill, in blocks of the given sizes
// (cycled), and returns every row's logits after the prefill.
std::vector<float> run_in_blocks(const Model& model, ThreadPool& pool, const std::vector<int32_t>& tokens, int head,
                                 std::initializer_list<int> sizes, KVType kv) {
  const int V = model.config().vocab_size, n = static_cast<int>(tokens.size());
  Context ctx(model.config(), 256, kv);
  std::vector<float> out(static_cast<size_t>(n - head) * V);
  std::vector<float> scratch(V);
  model.forward(std::span(tokens.data(), head), ctx, pool, scratch.data());
  auto it = sizes.begin();
  for (int i = head; i < n;) {
    const int k = std::min(*it, n - i);
    if (++it == sizes.end()) it = sizes.begin();
    model.forward(std::span(tokens.data() + i, k), ctx, pool, &out[static_cast<size_t>(i - head) * V], true);
    i += k;
  }
  return out;
}

// Index of the first float that differs in bits, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

TEST_P(BatchInvariance, DecodeVerifyAndPrefillLogitsAreBitIdentical) {
  const Case& c = GetParam();
  SyntheticSpec spec;
  spec.config = preset_config(c.preset);
  spec.weight_type = spec.embed_type = spec.head_type = c.type;
  spec.seed = 7;
  Model model(std::make_shared<ModelFile>(make_synthetic_model(spec)));
  const int V = model.config().vocab_size, head = 5, n = 5 + 24;
  auto tokens = test::some_tokens(n, V, 3);
  ThreadPool pool(test::emulated() ? 1 : 2);  // (results do not depend on it; threads crawl under qemu)
  const auto decode = run_in_blocks(model, pool, tokens, head, {1}, c.kv);
  // Verify blocks of several sizes, including 17 (more queries than one
  // attention task takes).
  const auto verify = run_in_blocks(model, pool, tokens, head, {4, 2, 8, 3, 1, 5}, c.kv);
  const auto verify17 = run_in_blocks(model, pool, tokens, head, {17, 7}, c.kv);
  // The prompt itself as one prefill batch (rows of every position).
  std::vector<float> prefill(static_cast<size_t>(n) * V);
  {
    Context ctx(model.config(), 256, c.kv);
    model.forward(tokens, ctx, pool, prefill.data(), true);
    prefill.erase(prefill.begin(), prefill.begin() + static_cast<ptrdiff_t>(head) * V);
  }
  const std::vector<float>* others[] = {&verify, &verify17, &prefill};
  for (const std::vector<float>* other : others) {
    const int64_t at = first_difference(decode, *other);
    EXPECT_EQ(at, -1) << "row " << at / V << " column " << at % V << ": decode " << decode[at] << " vs "
                      << (*other)[at] << " (" << kernels::active_isa() << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvariance,
    ::testing::Values(Case{"tiny-llama", DType::F32}, Case{"tiny-qwen3", DType::F16}, Case{"tiny-qwen3", DType::Q8_0},
                      Case{"tiny-qwen3", DType::PQ4}, Case{"tiny-llama", DType::PQ8}, Case{"tiny-gemma3", DType::PQ4},
                      // the int8 KV cache (--kv q8), with and without sliding-window layers
                      Case{"tiny-qwen3", DType::PQ4, KVType::Q8}, Case{"tiny-gemma3", DType::PQ4, KVType::Q8},
                      // and the 4-bit one (--kv q4)
                      Case{"tiny-qwen3", DType::PQ4, KVType::Q4}, Case{"tiny-gemma3", DType::PQ4, KVType::Q4}),
    [](const auto& info) {
      return info.param.preset.substr(5) + "_" + std::string(dtype_name(info.param.type)) +
             (info.param.kv == KVType::F16 ? "" : "_kv_" + std::string(kv_type_name(info.param.kv)));
    });

}  // namespace
}  // namespace pocket
