// Draft-model speculation: a draft with the same vocabulary keeps its own
// KV cache in step with the target (an identical draft is always accepted),
// a different draft (PQ4 weights for an F32 target) gives the target's
// greedy output exactly, also under a constraint and with a draft
// vocabulary, and a draft with another vocabulary is refused.
#include <gtest/gtest.h>

#include <set>

#include "common/test_util.h"
#include "constrained_check.h"
#include "convert/create_model.h"
#include "runtime/loader.h"
#include "shared_models.h"
#include "speculative/model_drafter.h"
#include "speculative/speculative.h"
#include "util/error.h"

namespace pocket {
namespace {

LoadedModel tiny_qwen3(const test::TempDir& dir, DType weights) {
  convert::CreateOptions co;
  co.preset = "tiny-qwen3";
  co.weights = weights;
  co.group = 32;
  const std::string path = dir.file(std::string("t-") + std::string(dtype_name(weights)) + ".gguf");
  convert::create_model(co, path);
  return load_model(path);
}

GenerateOptions greedy_through_eos(int n) {
  GenerateOptions o = test::greedy(n);
  o.stop_at_eos = false;
  return o;
}

TEST(ModelDrafter, IdenticalDraftIsAlwaysAcceptedAndADifferentOneIsLossless) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  const bool emulated = test::emulated();  // threads spin badly under qemu; the logic is ISA-independent
  Session s(target.model, target.tokenizer, 128, emulated ? 1 : 2);
  ModelDrafter same(target.model, target.tokenizer, *target.tokenizer, 128, 1, 0.0f);
  ModelDrafter other(q4.model, q4.tokenizer, *target.tokenizer, 128, 1);
  int other_drafted = 0, other_accepted = 0;
  for (int i = 0; i < (emulated ? 2 : 4); ++i) {
    const auto in = test::some_tokens(3 + 5 * i, 290, 60 + static_cast<uint64_t>(i));
    s.reset();
    const auto want = s.generate(in, greedy_through_eos(40));
    for (int k : {3, 8}) {
      SpeculativeStats st;
      s.reset();
      EXPECT_EQ(generate_speculative(s, same, in, greedy_through_eos(40), {k, false}, {}, &st).tokens, want.tokens) << i << " " << k;
      EXPECT_EQ(st.accepted, st.drafted) << "an identical draft out of step with the target at prompt " << i;
      EXPECT_GT(st.drafted, 0);
      s.reset();
      EXPECT_EQ(generate_speculative(s, other, in, greedy_through_eos(40), {k, false}, {}, &st).tokens, want.tokens) << i << " " << k;
      other_drafted += st.drafted;
      other_accepted += st.accepted;
    }
  }
  EXPECT_GT(other_accepted, 0);
  EXPECT_GT(other_drafted, other_accepted) << "the 4-bit draft never disagreed: the test would not see a rollback";
}

// Trees (--draft-tree): the greedy chain with the draft's next likeliest
// tokens as one-token branches at the first positions; greedy output stays
// the target's, and the branches sometimes catch what the chain misses.
TEST(ModelDrafter, TreesKeepGreedyOutputAndBranchAtTheFirstPositions) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  const bool emulated = test::emulated();
  Session s(target.model, target.tokenizer, 128, emulated ? 1 : 2);
  ModelDrafter other(q4.model, q4.tokenizer, *target.tokenizer, 128, 1, 0.0f);
  other.set_branching({3, 2, 0.0f});  // the random-weight draft is too sure for the default threshold
  const auto probe = test::some_tokens(9, 290, 7);
  std::vector<int32_t> chain;
  DraftTree tree;
  other.draft(probe, 6, chain);
  other.draft_tree(probe, 6, 63, tree);
  EXPECT_EQ(tree.first_chain(), chain);
  EXPECT_EQ(tree.size(), chain.size() + 6) << "two alternatives at each of the first three positions";
  for (int d : tree.depths()) EXPECT_LE(d, 6);
  int trees = 0;
  for (int i = 0; i < (emulated ? 1 : 4); ++i) {
    const auto in = test::some_tokens(3 + 5 * i, 290, 80 + static_cast<uint64_t>(i));
    s.reset();
    const auto want = s.generate(in, greedy_through_eos(40));
    for (int k : {2, 6}) {
      SpeculativeStats st;
      s.reset();
      EXPECT_EQ(generate_speculative(s, other, in, greedy_through_eos(40), {k, false, 16}, {}, &st).tokens, want.tokens) << i << " " << k;
      trees += st.tree_steps;
    }
  }
  EXPECT_GT(trees, 0);
}

TEST(ModelDrafter, ADraftWithAnotherVocabularyIsRefused) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32);
  const LoadedModel stories = load_model(test::stories_model());
  try {
    ModelDrafter d(stories.model, stories.tokenizer, *target.tokenizer, 64, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must share the tokenizer"), std::string::npos) << e.what();
  }
}

// A draft vocabulary (--draft-vocab): the draft runs without its full head
// and proposes, at each step, the likeliest of the ranking's first N tokens
// under its own full logits (the chain checked against a plain session of
// the draft restricted to those ids); the target's greedy output stays
// exact, and bad rankings are refused.
TEST(ModelDrafter, ADraftVocabularyProposesTheBestOfItsTokensAndStaysLossless) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  const int V = q4.model->config().vocab_size, N = V / 3;
  DraftVocab ranking{V, {}};
  for (int i = 0; i < V; ++i) ranking.ranked.push_back(static_cast<int32_t>((i * 7 + 3) % V));  // 7 is prime to V
  ASSERT_EQ(std::set<int32_t>(ranking.ranked.begin(), ranking.ranked.end()).size(), static_cast<size_t>(V));
  const std::set<int32_t> kept(ranking.ranked.begin(), ranking.ranked.begin() + N);
  Session s(target.model, target.tokenizer, 128, 2);
  ModelDrafter d(q4.model, q4.tokenizer, *target.tokenizer, 128, s.shared_pool(), 0.0f);  // as pocket run makes it
  EXPECT_EQ(s.shared_pool().use_count(), 2) << "the draft's session does not run on the target's pool";
  d.use_draft_vocab(ranking, N);
  EXPECT_EQ(d.draft_vocab(), N);
  Session ref(q4.model, q4.tokenizer, 128, 1);
  int outside = 0;  // steps where the draft's own argmax was a token outside the N
  for (int i = 0; i < 3; ++i) {
    const auto in = test::some_tokens(4 + 6 * i, 290, 90 + static_cast<uint64_t>(i));
    std::vector<int32_t> got, want, seq(in.begin(), in.end());
    d.draft(in, 6, got);
    for (int k = 0; k < 6; ++k) {
      const std::span<float> logits = ref.prefill(seq);
      int32_t best = -1;
      for (int32_t id : kept)
        if (best < 0 || logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)]) best = id;
      outside += !kept.count(test::argmax(logits.data(), static_cast<int>(logits.size())));
      want.push_back(best);
      seq.push_back(best);
    }
    EXPECT_EQ(got, want) << "prompt " << i;
  }
  EXPECT_GT(outside, 0) << "the draft's own choice was always inside the N: the restriction was not exercised";

  for (int i = 0; i < 2; ++i) {
    const auto in = test::some_tokens(3 + 5 * i, 290, 70 + static_cast<uint64_t>(i));
    s.reset();
    const auto plain = s.generate(in, greedy_through_eos(32));
    s.reset();
    SpeculativeStats st;
    EXPECT_EQ(generate_speculative(s, d, in, greedy_through_eos(32), {4, false}, {}, &st).tokens, plain.tokens) << i;
    EXPECT_GT(st.drafted, 0);
  }

  d.use_draft_vocab(ranking, 0);
  EXPECT_EQ(d.draft_vocab(), 0);
  auto refused = [&](const DraftVocab& v, int n, const char* why) {
    try {
      d.use_draft_vocab(v, n);
      ADD_FAILURE() << "no error for " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(DraftVocab{V + 1, ranking.ranked}, N, "ranks a vocabulary of");
  refused(DraftVocab{V, std::vector<int32_t>(ranking.ranked.begin(), ranking.ranked.begin() + 10)}, 11, "the ranking holds 10");
  refused(ranking, -1, "must be >= 0");
}

// prepare() runs the history through the draft ahead of drafting (the
// prompt's catch-up, timed apart by the decode loop, so the planner does not
// take it for a draft's cost); the drafts after it are the same.
TEST(ModelDrafter, PrepareCatchesUpOnTheHistoryAndKeepsTheDrafts) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  ModelDrafter warm(q4.model, q4.tokenizer, *target.tokenizer, 128, 1, 0.0f), cold(q4.model, q4.tokenizer, *target.tokenizer, 128, 1, 0.0f);
  const auto in = test::some_tokens(40, 290, 7);
  warm.prepare(in);
  EXPECT_EQ(warm.cached(), in.size());
  EXPECT_EQ(cold.cached(), 0u);
  std::vector<int32_t> a, b;
  warm.draft(in, 5, a);
  cold.draft(in, 5, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 5u);
}

// Before decoding, a draft model catches up on a probe of the prompt only
// (kCatchUpProbe tokens) and drafts one token from it, timed: the planner
// then knows a drafted token's cost before the first step, and the rest of
// the prompt is caught up only once drafting is expected to pay (always,
// without the adaptive planner), so a draft that cannot pay does not double
// the prompt's time.
TEST(ModelDrafter, CatchesUpOnAProbeOfThePromptUntilDraftingIsExpectedToPay) {
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  Session s(target.model, target.tokenizer, 256, 1);
  ModelDrafter d(q4.model, q4.tokenizer, *target.tokenizer, 256, 1, 0.0f);
  const auto in = test::some_tokens(100, 290, 11);
  SpeculativeStats st;
  generate_speculative(s, d, in, greedy_through_eos(0), {4, true}, {}, &st);
  EXPECT_EQ(d.cached(), kCatchUpProbe);
  EXPECT_GT(st.prompt_draft_seconds, 0.0);
  EXPECT_EQ(st.catch_up_seconds, 0.0);
  s.reset();
  const auto want = s.generate(in, greedy_through_eos(12));
  s.reset();
  EXPECT_EQ(generate_speculative(s, d, in, greedy_through_eos(12), {4, false}, {}, &st).tokens, want.tokens);
  EXPECT_GT(st.drafted, 0);
  EXPECT_GT(st.catch_up_seconds, 0.0);
  EXPECT_GE(d.cached(), in.size()) << "drafting caught up on the whole prompt";
}

// Under a constraint (each kind): the draft model's drafts are cut by the
// matcher and the output equals constrained plain greedy decoding.
TEST(ModelDrafter, ConstrainedGreedyEqualsPlain) {
  POCKET_SKIP_WHEN_EMULATED("masks and acceptance are ISA-independent; the greedy tests run per level");
  test::TempDir dir;
  const LoadedModel target = tiny_qwen3(dir, DType::F32), q4 = tiny_qwen3(dir, DType::PQ4);
  Session s(target.model, target.tokenizer, 128, 2);
  ModelDrafter same(target.model, target.tokenizer, *target.tokenizer, 128, 1, 0.0f);
  ModelDrafter other(q4.model, q4.tokenizer, *target.tokenizer, 128, 1);
  const auto cases = test::constraint_cases(*target.tokenizer);
  test::ConstrainedTotals total;
  for (int i = 0; i < 3; ++i) {
    const auto in = test::some_tokens(3 + 5 * i, 290, 80 + static_cast<uint64_t>(i));
    for (ModelDrafter* d : {&same, &other}) {
      const auto t = test::expect_constrained_greedy_as_plain(s, *d, in, cases, 40, {3, 8});
      total.drafted += t.drafted;
      total.accepted += t.accepted;
    }
  }
  EXPECT_GT(total.accepted, 0);
  EXPECT_GT(total.drafted, total.accepted) << "every draft was accepted: the matcher's cut was never exercised";
}

}  // namespace
}  // namespace pocket
