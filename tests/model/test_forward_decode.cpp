// Batched decode across contexts (Model::forward_decode, used by the
// server's slots) against one-token forward() calls per context.
#include <gtest/gtest.h>

#include <cstring>

#include "common/test_util.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "synthetic_model.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

std::shared_ptr<const ModelFile> decode_model(const std::string& preset, DType type) {
  return test::synthetic_model(preset, type, 7);
}

struct DecodeCase {
  std::string preset;
  DType type;
  float tol = 0;  // largest |difference| of a logit allowed
};
class ForwardDecode : public ::testing::TestWithParam<DecodeCase> {};

// Four contexts at different lengths (different prompts) take three decode
// steps together; the same contexts rebuilt and stepped one at a time must
// give the same logits. Tolerance: bit-identical (max |diff| == 0) for the
// tiled PQ4/PQ8 kernels (GGUF Q4_0 and Q8_0 run as PQ4 / PQ8 copies) and
// f32/f16 weights: each row's matmul, norms and attention are the same
// operations on the same values whatever the other rows are.
TEST_P(ForwardDecode, LogitsEqualOneContextAtATime) {
  const DecodeCase& tc = GetParam();
  auto file = decode_model(tc.preset, tc.type);
  Model model(file);
  const int V = model.config().vocab_size, n_ctx = 64, rows = 4;
  ThreadPool pool(2);
  const int lengths[rows] = {5, 1, 17, 9};
  std::vector<std::unique_ptr<Context>> batched, single;
  std::vector<float> scratch_logits(V);
  for (int r = 0; r < rows; ++r) {
    auto prompt = test::some_tokens(lengths[r], V, 100 + r);
    for (auto* set : {&batched, &single}) {
      set->push_back(std::make_unique<Context>(model.config(), n_ctx));
      model.forward(prompt, *set->back(), pool, scratch_logits.data());
    }
  }
  Model::DecodeScratch scratch;
  std::vector<Context*> ctxs;
  for (auto& c : batched) ctxs.push_back(c.get());
  for (int step = 0; step < 3; ++step) {
    auto tokens = test::some_tokens(rows, V, 200 + step);
    std::vector<float> got(static_cast<size_t>(rows) * V), want(V);
    model.forward_decode(tokens, ctxs, pool, got.data(), scratch);
    for (int r = 0; r < rows; ++r) {
      model.forward(std::span<const int32_t>(&tokens[r], 1), *single[r], pool, want.data());
      EXPECT_EQ(batched[r]->cache.size(), single[r]->cache.size());
      float max_diff = 0;
      for (int j = 0; j < V; ++j) max_diff = std::max(max_diff, std::abs(got[static_cast<size_t>(r) * V + j] - want[j]));
      EXPECT_LE(max_diff, tc.tol) << "row " << r << " step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardDecode,
                         ::testing::Values(DecodeCase{"tiny-qwen3", DType::F32}, DecodeCase{"tiny-qwen3", DType::PQ4},
                                           DecodeCase{"tiny-qwen3", DType::Q8_0, 0.0f}, DecodeCase{"tiny-llama", DType::PQ8},
                                           DecodeCase{"tiny-qwen2", DType::Q4_0},
                                           DecodeCase{"tiny-gemma3", DType::F16}),
                         [](const auto& info) {
                           return info.param.preset.substr(5) + "_" + std::to_string(info.index);
                         });

TEST(ForwardDecodeErrors, MismatchedFullAndRepeatedContextsAreClearErrors) {
  auto file = decode_model("tiny-qwen3", DType::F32);
  Model model(file);
  ThreadPool pool(1);
  Context a(model.config(), 2), b(model.config(), 8);
  std::vector<float> logits(static_cast<size_t>(2) * model.config().vocab_size);
  Model::DecodeScratch s;
  std::vector<int32_t> two = {1, 2}, one = {1};
  std::vector<Context*> same = {&b, &b}, ab = {&a, &b}, just_a = {&a};
  EXPECT_THROW(model.forward_decode(two, same, pool, logits.data(), s), Error);
  EXPECT_THROW(model.forward_decode(one, ab, pool, logits.data(), s), Error);
  std::vector<int32_t> bad = {-1};
  EXPECT_THROW(model.forward_decode(bad, just_a, pool, logits.data(), s), Error);
  model.forward_decode(one, just_a, pool, logits.data(), s);
  model.forward_decode(one, just_a, pool, logits.data(), s);
  try {
    model.forward_decode(one, just_a, pool, logits.data(), s);
    FAIL() << "a full context must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pocket
