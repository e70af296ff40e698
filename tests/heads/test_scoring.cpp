// Decisions on the real stories260K model: the hidden-state taps agree with
// the logits, the shared-KV-cache ranking and zero-shot paths equal the plain
// path (a full prefill per candidate), features do not depend on the thread
// count, and the content hash tells models apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/test_util.h"
#include "formats/content_hash.h"
#include "heads/scorer.h"
#include "heads/train_head.h"
#include "kernels/kernels.h"
#include "runtime/loader.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::heads {
namespace {

const LoadedModel& stories() {
  static LoadedModel m = load_model(test::stories_model());
  return m;
}

TEST(HeadsModel, FinalNormedTapTimesTheOutputMatrixIsTheLogits) {
  const LoadedModel& m = stories();
  const ModelConfig& c = m.model->config();
  const std::vector<int32_t> toks = m.tokenizer->encode("Once upon a time there was a cat", {false, true});
  const int n = static_cast<int>(toks.size());
  ThreadPool pool(2);
  Context a(c, 64), b(c, 64);
  std::vector<float> logits(static_cast<size_t>(n) * c.vocab_size), normed(static_cast<size_t>(n) * c.dim),
      last(static_cast<size_t>(n) * c.dim);
  m.model->forward(toks, a, pool, logits.data(), true);
  HiddenTaps taps;
  taps.final_normed = normed.data();
  taps.layer = c.n_layers - 1;
  taps.layer_out = last.data();
  m.model->forward_hidden(toks, b, pool, taps);
  EXPECT_EQ(b.cache.size(), n);
  // logits = output matrix (the tied embedding here) x final normed state, in double.
  const TensorView* out = m.file->find("output.weight");
  if (!out) out = &m.file->get("token_embd.weight");
  std::vector<float> row(static_cast<size_t>(c.dim));
  double worst = 0, scale = 0;
  for (int i = 0; i < n; ++i)
    for (int v = 0; v < c.vocab_size; v += 7) {
      kernels::dequant_row(*out, v, row.data());
      double s = 0;
      for (int k = 0; k < c.dim; ++k) s += static_cast<double>(row[k]) * normed[static_cast<size_t>(i) * c.dim + k];
      worst = std::max(worst, std::fabs(s - logits[static_cast<size_t>(i) * c.vocab_size + v]));
      scale = std::max(scale, std::fabs(s));
    }
  EXPECT_LT(worst / scale, 1e-4) << "tap and logits disagree";
  // The last layer's residual stream, RMS-normed with output_norm, is the final normed state.
  TensorView nw = m.file->get("output_norm.weight");
  nw.shape = {1, c.dim};
  std::vector<float> w(static_cast<size_t>(c.dim));
  kernels::dequant_row(nw, 0, w.data());
  for (int i = 0; i < n; ++i) {
    double ss = 0;
    for (int k = 0; k < c.dim; ++k) ss += static_cast<double>(last[i * c.dim + k]) * last[i * c.dim + k];
    const double inv = 1.0 / std::sqrt(ss / c.dim + c.norm_eps);
    for (int k = 0; k < c.dim; ++k)
      EXPECT_NEAR(last[i * c.dim + k] * inv * w[k], normed[i * c.dim + k], 1e-4 * (1 + std::fabs(normed[i * c.dim + k])));
  }
}

TEST(HeadsModel, SharedPrefixScoringEqualsFullPrefillPerCandidate) {
  const LoadedModel& m = stories();
  Scorer s(m.model, m.tokenizer, 2, 256);
  const std::vector<std::string> cands = {"the dog ran to the park.", "a big red ball.", "she was happy.",
                                          "Lily and Tom played", "x"};
  auto shared = s.rank_loglik("Once upon a time, a little girl saw", cands, "", true);
  auto plain = s.rank_loglik("Once upon a time, a little girl saw", cands, "", false);
  ASSERT_EQ(shared.size(), plain.size());
  // Tolerance: 1e-3 nats per token (the two paths batch the tokens differently:
  // activation quantisation and summation order may differ per batch).
  for (size_t i = 0; i < shared.size(); ++i) {
    EXPECT_EQ(shared[i].index, plain[i].index);
    EXPECT_NEAR(shared[i].score, plain[i].score, 1e-3);
  }
  // And the ranking is not degenerate: scores differ between candidates.
  EXPECT_GT(shared.front().score - shared.back().score, 0.1);
}

TEST(HeadsModel, RankingHeadSharedPathEqualsPlainPath) {
  const LoadedModel& m = stories();
  Head h;
  h.labels = {"no", "yes"};
  h.features.pooling = Pooling::Mean;
  h.net.init(m.model->config().dim, 8, 2, 3);
  test::Rng rng(4);
  for (float& v : h.net.w2) v = rng.uniform();
  h.mean.assign(static_cast<size_t>(h.net.in), 0.0f);
  h.inv_std.assign(static_cast<size_t>(h.net.in), 1.0f);
  Scorer s(m.model, m.tokenizer, 2, 256);
  const std::vector<std::string> cands = {"He went home.", "The sun was hot and bright.", "Mom said no."};
  for (Pooling p : {Pooling::Mean, Pooling::Last}) {
    h.features.pooling = p;
    auto a = s.rank_head(h, "Tom wanted a cookie.", cands, "yes", true);
    auto b = s.rank_head(h, "Tom wanted a cookie.", cands, "yes", false);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].index, b[i].index);
      EXPECT_NEAR(a[i].score, b[i].score, 1e-4);  // probabilities
    }
  }
}

// Candidates packed into batches (each after its own copy of the query's K/V
// rows) equal a full prefill of query + candidate each; a 48-token context
// splits the eight candidates over several batches. Tolerance: 1e-3 relative
// (absolute below 1) on the pooled features; the rounding of the fp16 cache
// and of the attention's summation order gives ~1e-4.
TEST(HeadsModel, PackedCandidatesEqualAFullPrefillEach) {
  const LoadedModel& m = stories();
  ASSERT_TRUE(m.model->packable());
  const int d = m.model->config().dim;
  const std::vector<int32_t> query = m.tokenizer->encode("Tom wanted a cookie but", {false, true});
  std::vector<std::vector<int32_t>> cands;
  for (const char* t : {" he went home.", " the sun was hot and bright today.", " Mom said no.", " a dog", " they all sang",
                        " it rained.", " Lily laughed and ran to the big tree.", " no"})
    cands.push_back(m.tokenizer->encode(t, {false, false}));
  FeatureRunner runner(m.model, 2, 48);
  const std::vector<int> layers = test::emulated() ? std::vector<int>{2} : std::vector<int>{-1, 2, 4};  // 76 s under qemu
  for (int layer : layers)
    for (Pooling p : {Pooling::Mean, Pooling::Last}) {
      FeatureSpec spec;
      spec.pooling = p;
      spec.layer = layer;
      std::vector<float> packed(cands.size() * static_cast<size_t>(d)), plain(static_cast<size_t>(d));
      runner.features_after(query, cands, spec, packed.data());
      double worst = 0;
      for (size_t k = 0; k < cands.size(); ++k) {
        std::vector<int32_t> all = query;
        all.insert(all.end(), cands[k].begin(), cands[k].end());
        runner.features(all, spec, plain.data(), query.size());
        for (int j = 0; j < d; ++j) {
          const double a = packed[k * static_cast<size_t>(d) + j], b = plain[static_cast<size_t>(j)];
          worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
        }
      }
      EXPECT_LT(worst, 1e-3) << "layer " << layer;
      std::printf("packed vs plain, layer %d, pooling %d: worst relative difference %.2e\n", layer, static_cast<int>(p),
                  worst);
    }
  // The log-likelihood scorer packs the same way (all but each candidate's
  // last token): equal to a full prefill per candidate within 1e-3 nats/token.
  Context ctx(m.model->config(), 48);
  ThreadPool pool(2);
  cands.push_back(m.tokenizer->encode(" x", {false, false}));  // one token: scored from the prefix's logits alone
  const auto packed_ll = score_continuations(*m.model, ctx, pool, query, cands, true);
  const auto plain_ll = score_continuations(*m.model, ctx, pool, query, cands, false);
  for (size_t k = 0; k < cands.size(); ++k) {
    EXPECT_EQ(packed_ll[k].tokens, plain_ll[k].tokens);
    EXPECT_NEAR(packed_ll[k].mean(), plain_ll[k].mean(), 1e-3) << "candidate " << k;
  }
  std::vector<std::vector<int32_t>> too_long = {std::vector<int32_t>(48, 5)};
  std::vector<float> out(static_cast<size_t>(d));
  EXPECT_THROW(runner.features_after(query, too_long, FeatureSpec{}, out.data()), Error);
}

TEST(HeadsModel, RouteAnswersOtherBelowTheThreshold) {
  const LoadedModel& m = stories();
  Head h;
  h.labels = {"a", "b", "c", "d"};
  h.net.init(m.model->config().dim, 0, 4, 1);  // zero weights: every label 1/4
  h.mean.assign(static_cast<size_t>(h.net.in), 0.0f);
  h.inv_std.assign(static_cast<size_t>(h.net.in), 1.0f);
  h.net.b2 = {0.0f, 0.5f, 0.0f, 0.0f};  // "b" on top with p = e^.5 / (3 + e^.5) = 0.355
  h.threshold = 0.4f;
  h.other_label = "not mine";
  Scorer s(m.model, m.tokenizer, 1, 64);
  Prediction p = s.route(h, "Tom ran.");
  EXPECT_TRUE(p.out_of_scope);
  EXPECT_EQ(p.label, "not mine");
  EXPECT_EQ(p.index, -1);
  EXPECT_NEAR(p.probability, 0.3547, 1e-3);
  p = s.route(h, "Tom ran.", 0.3f);  // an explicit threshold overrides the head's
  EXPECT_FALSE(p.out_of_scope);
  EXPECT_EQ(p.label, "b");
  EXPECT_EQ(s.classify(h, "Tom ran.").label, "b");  // classify ignores the threshold
}

TEST(HeadsModel, ZeroShotPicksTheLikeliestVerbalisation) {
  const LoadedModel& m = stories();
  Scorer s(m.model, m.tokenizer, 2, 256);
  // stories260K continues "Once upon a" with " time" far more than with the others.
  Prediction p = s.zero_shot("Once upon a", {"time", "banana", "quantum"}, "{text}");
  EXPECT_EQ(p.label, "time");
  float sum = 0;
  for (float x : p.probs) sum += x;
  EXPECT_NEAR(sum, 1.0f, 1e-5);
}

TEST(HeadsModel, FeaturesDoNotDependOnTheThreadCount) {
  const LoadedModel& m = stories();
  std::vector<Example> data;
  for (const char* t : {"The cat sat.", "A dog barked at the bird.", "Lily had a red hat.", "Tom ran.", "It was sunny."})
    data.push_back({t, "x", ""});
  data.push_back({"and the ball", "x", "Tom threw the ball"});  // a pair
  ExtractOptions one, three;
  one.threads = 1, three.threads = 3;
  FeatureSpec spec;
  for (int layer : {-1, 1}) {
    spec.layer = layer;
    Matrix a = extract_features(m.model, *m.tokenizer, data, spec, one);
    Matrix b = extract_features(m.model, *m.tokenizer, data, spec, three);
    EXPECT_EQ(a.data, b.data) << "layer " << layer;
  }
}

TEST(HeadsModel, FeatureCacheRoundTripsAndIsKeyedByTheData) {
  const LoadedModel& m = stories();
  test::TempDir dir;
  std::vector<Example> data = {{"One.", "a", ""}, {"Two cats.", "b", ""}};
  ExtractOptions o;
  o.cache_dir = dir.path();
  o.model_hash = "feedfacefeedface";
  FeatureSpec spec;
  Matrix a = extract_features(m.model, *m.tokenizer, data, spec, o);
  const std::string path = feature_cache_path(dir.path(), o.model_hash, spec, data, o.max_tokens, "hidden");
  ASSERT_TRUE(std::filesystem::exists(path));
  Matrix b;
  ASSERT_TRUE(read_feature_cache(path, 2, a.cols, b));
  EXPECT_EQ(a.data, b.data);
  data[1].text = "Three cats.";
  EXPECT_NE(feature_cache_path(dir.path(), o.model_hash, spec, data, o.max_tokens, "hidden"), path);
  spec.pooling = Pooling::Last;
  EXPECT_NE(feature_cache_path(dir.path(), o.model_hash, spec, data, o.max_tokens, "hidden"), path);
  EXPECT_FALSE(read_feature_cache(path, 3, a.cols, b)) << "a cache of another size is not used";
}

TEST(HeadsModel, ContentHashIsStableAndSeesTheWeights) {
  const LoadedModel& m = stories();
  ThreadPool pool(3);
  const std::string h1 = model_content_hash(*m.file, m.tokenizer->vocab());
  EXPECT_EQ(h1.size(), 16u);
  EXPECT_EQ(h1, model_content_hash(*m.file, m.tokenizer->vocab(), &pool));
  ModelFile copy = *m.file;
  auto& t = copy.tensors.at("blk.0.ffn_up.weight");
  std::vector<uint8_t> bytes(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes);
  bytes[bytes.size() / 2] ^= 1;
  t.data = bytes.data();
  EXPECT_NE(model_content_hash(copy, m.tokenizer->vocab()), h1);
  Vocab v = m.tokenizer->vocab();
  v.tokens[5] += "x";
  EXPECT_NE(model_content_hash(*m.file, v), h1);
}

TEST(HeadsModel, TrainHeadLearnsASimpleTopicSplit) {
  POCKET_SKIP_WHEN_EMULATED("trains a head on 160 model features; ISA-independent");
  const LoadedModel& m = stories();
  const char* animals[] = {"The cat", "A dog", "The bird", "A fish", "The frog", "A bunny", "The duck", "A puppy"};
  const char* food[] = {"The cake", "An apple", "The soup", "A cookie", "The bread", "A pie", "The candy", "An egg"};
  const char* tails[] = {" was big.", " was little.", " was red.", " was happy.", " was on the table.",
                         " was in the box.", " was nice.", " was there.", " was good.", " was old."};
  std::vector<Example> train_set, val_set;
  for (int t = 0; t < 10; ++t)
    for (int i = 0; i < 8; ++i) {
      (t < 8 ? train_set : val_set).push_back({std::string(animals[i]) + tails[t], "animal", ""});
      (t < 8 ? train_set : val_set).push_back({std::string(food[i]) + tails[t], "food", ""});
    }
  TrainHeadOptions o;
  o.train.max_epochs = 40;
  o.train.learning_rate = 1e-2f;
  ThreadPool pool(2);
  TrainHeadResult r = train_head(m.model, *m.tokenizer, "hash", train_set, val_set, {}, o, &pool);
  ASSERT_EQ(r.splits.size(), 2u);
  EXPECT_GT(r.splits[1].m.accuracy, 0.8) << "held-out sentences with unseen endings";
  // The trained head, used through the Scorer, gives what training measured.
  Scorer s(m.model, m.tokenizer, 2, 256);
  int right = 0;
  for (const Example& e : val_set) right += s.classify(r.head, e.text).label == e.label;
  EXPECT_NEAR(static_cast<double>(right) / val_set.size(), r.splits[1].m.accuracy, 1e-9);
}

}  // namespace
}  // namespace pocket::heads
