// `pocket create` logic: synthetic Pocket files at the tiny presets load,
// run, are deterministic, and hold the synthetic generator's values.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "common/test_util.h"
#include "convert/create_model.h"
#include "kernels/kernels.h"
#include "model/synthetic.h"
#include "runtime/loader.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CreatePreset : public ::testing::TestWithParam<const char*> {};

TEST_P(CreatePreset, LoadsAndRuns) {
  test::TempDir dir;
  convert::CreateOptions o;
  o.preset = GetParam();
  o.weights = DType::PQ8;
  o.group = 32;
  const std::string path = dir.file("m.pocket");
  convert::create_model(o, path);
  LoadedModel m = load_model(path);
  EXPECT_EQ(m.file->format, "pocket");
  const ModelConfig want = preset_config(o.preset);
  const ModelConfig& got = m.model->config();
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.dim, want.dim);
  EXPECT_EQ(got.n_layers, want.n_layers);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.tied_embeddings, want.tied_embeddings);
  EXPECT_EQ(got.rope_style, want.rope_style);
  EXPECT_EQ(m.file->get("blk.1.ffn_up.weight").type, DType::PQ8);
  EXPECT_EQ(m.file->get("blk.1.ffn_norm.weight").type, DType::F32);

  // The tokenizer is byte-level: any text round-trips, one token per byte.
  EXPECT_EQ(m.tokenizer->vocab_size(), want.vocab_size);
  const std::string text = "Hello, wörld!\n";
  auto ids = m.tokenizer->encode(text);
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_EQ(m.tokenizer->decode(ids), text);
  EXPECT_TRUE(m.tokenizer->is_eos(*m.tokenizer->token_id("<|im_end|>")));
  EXPECT_EQ(m.chat_format, ChatFormat::ChatML);

  // A forward pass gives finite logits.
  ThreadPool pool(2);
  Context ctx(got, 64);
  std::vector<float> logits(static_cast<size_t>(got.vocab_size));
  m.model->forward(ids, ctx, pool, logits.data());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));

  // Stored values are the generator's: row 0 of a matrix (first 256-row
  // block) and a norm, within 8-bit quantization error (|w| <= sqrt(3/cols),
  // step = max/127 per group, so error <= 0.5 * sqrt(3/64) / 127 < 0.001).
  const TensorView& q = m.file->get("blk.0.attn_q.weight");
  auto ref = synthetic_tensor("blk.0.attn_q.weight#0", std::min<int64_t>(256, q.rows()), q.cols(), o.seed);
  std::vector<float> row(static_cast<size_t>(q.cols()));
  kernels::dequant_row(q, 0, row.data());
  for (size_t k = 0; k < row.size(); ++k) EXPECT_NEAR(row[k], ref[k], 1e-3f) << k;
  TensorView norm = m.file->get("output_norm.weight");
  norm.shape = {1, norm.cols()};  // dequant_row reads 2-D views
  auto nref = synthetic_tensor("output_norm.weight#0", 1, norm.cols(), o.seed);
  kernels::dequant_row(norm, 0, row.data());
  for (int64_t k = 0; k < norm.cols(); ++k) EXPECT_EQ(row[static_cast<size_t>(k)], nref[static_cast<size_t>(k)]);
}

INSTANTIATE_TEST_SUITE_P(Tiny, CreatePreset, ::testing::Values("tiny-qwen3", "tiny-qwen2", "tiny-llama"));

TEST(Create, DeterministicInSeed) {
  test::TempDir dir;
  convert::CreateOptions o;
  o.preset = "tiny-qwen3";
  convert::create_model(o, dir.file("a"));
  convert::create_model(o, dir.file("b"));
  o.seed = 2;
  convert::create_model(o, dir.file("c"));
  EXPECT_EQ(slurp(dir.file("a")), slurp(dir.file("b")));
  EXPECT_NE(slurp(dir.file("a")), slurp(dir.file("c")));
}

TEST(Create, BadOptionsAreClear) {
  test::TempDir dir;
  convert::CreateOptions o;
  o.preset = "tiny-gpt";
  try {
    convert::create_model(o, dir.file("x"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny-gpt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(convert::synthetic_vocab(100), Error);
}

}  // namespace
}  // namespace pocket
