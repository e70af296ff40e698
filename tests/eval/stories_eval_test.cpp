// Evaluation on the real stories260K model: against itself, against the
// plain reference forward pass, and quantized copies of it.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "convert/quantize_model.h"
#include "eval/gguf_baseline.h"
#include "eval/perplexity.h"
#include "model/reference_model.h"
#include "runtime/loader.h"

namespace pocket::eval {
namespace {

const char* kText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "dog. One day, she saw a big red ball under a tree. She ran to get it, but the ball rolled away. Lily "
    "laughed and ran after it. Her mom said, \"Be careful, Lily!\" Lily smiled and said, \"I will, Mom!\"";

EvalOptions options_for(const LoadedModel& m, int ctx, int stride) {
  EvalOptions o;
  o.ctx = ctx;
  o.stride = stride;
  o.threads = 2;
  o.add_bos = m.tokenizer->vocab().add_bos;
  o.bos_id = m.tokenizer->vocab().bos_id;
  return o;
}

TEST(StoriesEval, ModelAgainstItselfHasZeroKlAndFullAgreement) {
  LoadedModel m = load_model(test::stories_model());
  const auto tokens = tokenize_for_eval(*m.tokenizer, kText, "text");
  const EvalResult r = evaluate(*m.model, m.model.get(), tokens, options_for(m, 32, 0));
  ASSERT_TRUE(r.has_reference);
  EXPECT_EQ(r.kl_mean, 0.0);
  EXPECT_EQ(r.kl_max, 0.0);
  EXPECT_EQ(r.top1_agreement, 1.0);
  EXPECT_EQ(r.model.sum, r.reference.sum);
  EXPECT_EQ(r.model.count, static_cast<int64_t>(tokens.size()));  // BOS: every text token is predicted
  EXPECT_GT(r.model.perplexity(), 1.0);
}

// Perplexity computed directly: ReferenceModel (f32 KV, naive loops) fed
// [BOS] + each disjoint chunk of ctx-1 tokens, its own log-softmax in double.
TEST(StoriesEval, PerplexityMatchesReferenceModel) {
  LoadedModel m = load_model(test::stories_model());
  ASSERT_TRUE(m.tokenizer->vocab().add_bos);
  const auto tokens = tokenize_for_eval(*m.tokenizer, kText, "text");
  const int ctx = 24;
  const EvalResult r = evaluate(*m.model, nullptr, tokens, options_for(m, ctx, ctx - 1));

  ReferenceModel ref(*m.file);
  double nll = 0;
  int64_t n = 0;
  for (size_t begin = 0; begin < tokens.size(); begin += ctx - 1) {
    ref.reset();
    const std::vector<float>* logits = &ref.forward(m.tokenizer->vocab().bos_id);
    for (size_t j = begin; j < std::min(tokens.size(), begin + ctx - 1); ++j) {
      double mx = -INFINITY, s = 0;
      for (float v : *logits) mx = std::max(mx, static_cast<double>(v));
      for (float v : *logits) s += std::exp(v - mx);
      nll += mx + std::log(s) - (*logits)[static_cast<size_t>(tokens[j])];
      ++n;
      logits = &ref.forward(tokens[j]);
    }
  }
  ASSERT_EQ(r.model.count, n);
  const double want = std::exp(nll / static_cast<double>(n));
  // The fast path keeps K/V in fp16 and sums in a different order: allow 0.5%.
  EXPECT_NEAR(r.model.perplexity(), want, 5e-3 * want);
}

struct Scores {
  double kl, top1;
};

Scores score_against_f32(const std::string& path, const LoadedModel& f32, const std::vector<int32_t>& tokens) {
  LoadedModel q = load_model(path);
  check_same_vocab(*q.model, *q.tokenizer, *f32.model, *f32.tokenizer);
  const EvalResult r = evaluate(*q.model, f32.model.get(), tokens, options_for(f32, 64, 0));
  return {r.kl_mean, r.top1_agreement};
}

TEST(StoriesEval, CoarserQuantizationHasHigherKl) {
  test::TempDir dir;
  LoadedModel f32 = load_model(test::stories_model());
  const auto tokens = tokenize_for_eval(*f32.tokenizer, kText, "text");

  convert::QuantizeOptions q8;
  q8.weights = q8.embed = DType::PQ8;
  q8.group = 32;
  convert::quantize_model(test::stories_model(), dir.file("q8.gguf"), q8);
  convert::QuantizeOptions q4 = q8;
  q4.weights = q4.embed = DType::PQ4;
  q4.group = 128;
  convert::quantize_model(test::stories_model(), dir.file("q4.gguf"), q4);
  GgufBaselineOptions g4;
  g4.type = DType::Q4_0;
  write_gguf_baseline(test::stories_model(), dir.file("q4_0.gguf"), g4);

  const Scores s8 = score_against_f32(dir.file("q8.gguf"), f32, tokens);
  const Scores s4 = score_against_f32(dir.file("q4.gguf"), f32, tokens);
  const Scores s40 = score_against_f32(dir.file("q4_0.gguf"), f32, tokens);
  EXPECT_GT(s8.kl, 0.0);
  EXPECT_GT(s4.kl, 2 * s8.kl) << "PQ4 g128 KL " << s4.kl << " vs PQ8 KL " << s8.kl;
  EXPECT_GT(s40.kl, 2 * s8.kl) << "Q4_0 KL " << s40.kl << " vs PQ8 KL " << s8.kl;
  EXPECT_GE(s8.top1, s4.top1);
}

TEST(StoriesEval, GgufBaselineKeepsUnblockableRowsAtFallback) {
  test::TempDir dir;
  GgufBaselineOptions o;
  o.type = DType::Q4_0;
  o.fallback = DType::Q8_0;
  write_gguf_baseline(test::stories_model(), dir.file("b.gguf"), o);
  LoadedModel m = load_model(dir.file("b.gguf"));
  EXPECT_EQ(m.file->format, "gguf");
  // stories260K: dim 64 (Q4_0 fits), hidden 172 (not a multiple of 32: ffn_down
  // rows stay F32, since Q8_0 needs 32-blocks too).
  EXPECT_EQ(m.file->get("blk.0.ffn_down.weight").type, DType::F32);
  EXPECT_EQ(m.file->get("blk.0.ffn_up.weight").type, DType::Q4_0);
  EXPECT_EQ(m.file->get("token_embd.weight").type, DType::Q4_0);
  EXPECT_EQ(m.file->get("blk.0.attn_norm.weight").type, DType::F32);
  const WeightStats s = weight_stats(*m.file);
  EXPECT_GT(s.bits_per_weight(), 4.5);  // the F32 tensors cost more than Q4_0's 4.5
  EXPECT_LT(s.bits_per_weight(), 32.0);
}

}  // namespace
}  // namespace pocket::eval
