// Speculative decoding against plain decoding: greedy output token for
// token (and the same text, stop reason and streamed pieces) over many
// prompts on stories260K, a synthetic Qwen3-shaped model and pocket-mini,
// with drafters that are always right (oracle), partly right (a corrupted
// oracle: rejections at every position of a block) and prompt lookup;
// and sampling's rejection rule against the exact distribution; the same
// under a constraint (masked distributions, drafts cut by the matcher).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "common/test_util.h"
#include "constrained_check.h"
#include "sampling_check.h"
#include "convert/create_model.h"
#include "runtime/loader.h"
#include "speculative/drafter.h"
#include "speculative/planner.h"
#include "shared_models.h"
#include "speculative/speculative.h"
#include "util/error.h"

namespace pocket {
namespace {

using test::stories;
using test::synthetic_qwen3;

std::string mini_path() { return test::test_data_dir() + "/../../models/pocket-mini.pq4"; }

// The oracle's sequence with every `period`-th generated token replaced, so
// drafts are rejected at varying positions inside a block.
class CorruptedReplay : public Drafter {
 public:
  CorruptedReplay(std::vector<int32_t> seq, size_t prompt, int period, int vocab) : seq_(std::move(seq)) {
    for (size_t i = prompt; i < seq_.size(); ++i)
      if ((i - prompt) % static_cast<size_t>(period) == static_cast<size_t>(period) - 1)
        seq_[i] = (seq_[i] + 1) % vocab;
  }
  const char* name() const override { return "corrupted"; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override {
    // Proposes the (corrupted) continuation at this length, whatever the history.
    out.clear();
    for (size_t i = history.size(); i < seq_.size() && static_cast<int>(out.size()) < max; ++i) out.push_back(seq_[i]);
  }

 private:
  std::vector<int32_t> seq_;
};

// Proposes `count` copies of one token (fewer when asked for fewer).
class Repeat : public Drafter {
 public:
  Repeat(int32_t token, int count) : token_(token), count_(count) {}
  const char* name() const override { return "repeat"; }
  void draft(std::span<const int32_t>, int max, std::vector<int32_t>& out) override {
    out.assign(static_cast<size_t>(std::clamp(max, 0, count_)), token_);
  }

 private:
  int32_t token_;
  int count_;
};

using test::greedy;

struct Outcome {
  GenerateResult r;
  std::vector<std::string> pieces;
};

Outcome plain(Session& s, const std::vector<int32_t>& in, const GenerateOptions& o) {
  Outcome out;
  s.reset();
  out.r = s.generate(in, o, [&](std::string_view p) {
    out.pieces.emplace_back(p);
    return true;
  });
  return out;
}

Outcome speculative(Session& s, Drafter& d, const std::vector<int32_t>& in, const GenerateOptions& o,
                    SpeculativeOptions so, SpeculativeStats* st = nullptr) {
  Outcome out;
  s.reset();
  out.r = generate_speculative(s, d, in, o, so, [&](std::string_view p) {
    out.pieces.emplace_back(p);
    return true;
  }, st);
  return out;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.r.tokens, b.r.tokens) << what;
  EXPECT_EQ(a.r.text, b.r.text) << what;
  EXPECT_EQ(a.r.stop, b.r.stop) << what;
  EXPECT_EQ(a.r.eos_token, b.r.eos_token) << what;
  EXPECT_EQ(a.pieces, b.pieces) << what;
}

// Prompts: token sequences drawn from the model's vocabulary plus a few
// texts (real text makes lookup drafts likely to hit).
std::vector<std::vector<int32_t>> prompts(const LoadedModel& m, int count) {
  std::vector<std::vector<int32_t>> out;
  EncodeOptions eo;
  eo.add_bos = m.tokenizer->vocab().add_bos;
  for (const char* t : {"Once upon a time", "The cat sat on the mat. The cat sat on the", "Tom and Lily went to the park. Tom"})
    out.push_back(m.tokenizer->encode(t, eo));
  const int V = std::min(m.tokenizer->vocab_size(), m.model->config().vocab_size);
  for (int i = static_cast<int>(out.size()); i < count; ++i) out.push_back(test::some_tokens(3 + i % 9, V, 100 + i));
  return out;
}

// Under qemu (test.sh's no-avx512 and aarch64 stages, which run this per
// kernel level) fewer prompts and block sizes: the kernels are what differs.
void check_model_greedy(const LoadedModel& m, int n_prompts, int n_tokens, KVType kv = KVType::F16) {
  const bool emulated = test::emulated();
  Session s(m.model, m.tokenizer, 256, emulated ? 1 : 2, /*batch=*/0, kv);  // threads spin badly under qemu
  int drafted = 0, accepted = 0;
  const std::vector<int> blocks = emulated ? std::vector<int>{4, 32} : std::vector<int>{1, 4, 16, 32};
  if (emulated) n_prompts = std::min(n_prompts, 2);  // every kernel path is already taken by two
  for (const auto& in : prompts(m, n_prompts)) {
    const auto want = plain(s, in, greedy(n_tokens));
    std::vector<int32_t> seq = in;
    seq.insert(seq.end(), want.r.tokens.begin(), want.r.tokens.end());
    ReplayDrafter oracle(seq);
    CorruptedReplay corrupted(seq, in.size(), 3 + static_cast<int>(in.size()) % 4, m.model->config().vocab_size);
    LookupDrafter lookup;
    std::vector<Drafter*> drafters = {&oracle, &corrupted};
    if (!emulated) drafters.push_back(&lookup);  // its logic is ISA-independent
    for (Drafter* d : drafters)
      for (int k : blocks) {
        SpeculativeStats st;
        expect_same(speculative(s, *d, in, greedy(n_tokens), {k, false}, &st), want,
                    std::string(d->name()) + " k=" + std::to_string(k));
        drafted += st.drafted;
        accepted += st.accepted;
        if (d == &oracle && want.r.stop == GenerateResult::Stop::MaxTokens) {
          EXPECT_EQ(st.accepted, st.drafted);
        }
      }
    expect_same(speculative(s, oracle, in, greedy(n_tokens), {16, true}), want, "oracle adaptive");
  }
  EXPECT_GT(drafted, accepted) << "some drafts were rejected";
  EXPECT_GT(accepted, 0);
}

TEST(Speculative, GreedyMatchesPlainOnStories) { check_model_greedy(stories(), 12, 40); }

TEST(Speculative, GreedyMatchesPlainOnSyntheticQwen3) { check_model_greedy(synthetic_qwen3(), 8, 24); }

// The int8 KV cache keeps batch invariance: verify blocks, rollback of
// rejected drafts and plain decoding agree token for token.
TEST(Speculative, GreedyMatchesPlainWithQ8Cache) {
  check_model_greedy(stories(), test::emulated() ? 2 : 6, 32, KVType::Q8);
}

TEST(Speculative, GreedyMatchesPlainOnPocketMini) {
  if (!std::filesystem::exists(mini_path())) GTEST_SKIP() << "models/pocket-mini.pq4 is not in the tree";
  static LoadedModel m = load_model(mini_path());
  check_model_greedy(m, test::emulated() ? 1 : 3, 16);
}

TEST(Speculative, StopStringsEosMaxTokensRepeatPenaltyAndCancellationAsPlain) {
  POCKET_SKIP_WHEN_EMULATED("the stop logic is ISA-independent; the greedy tests run per level");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 256, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  auto in = m.tokenizer->encode("Once upon a time", eo);
  auto base = plain(s, in, greedy(120));
  std::vector<int32_t> seq = in;
  seq.insert(seq.end(), base.r.tokens.begin(), base.r.tokens.end());
  ReplayDrafter oracle(seq);
  std::vector<GenerateOptions> cases;
  for (int n : {0, 1, 2, 3, 17}) cases.push_back(greedy(n));
  auto stop = greedy(120);
  stop.stop_strings = {"Lily", "park"};
  cases.push_back(stop);
  auto eos = greedy(400);  // stories end with EOS well before 400 tokens
  cases.push_back(eos);
  auto ignore = greedy(150);
  ignore.stop_at_eos = false;
  cases.push_back(ignore);
  auto penalty = greedy(60);
  penalty.sampling.repeat_penalty = 1.3f;
  cases.push_back(penalty);
  for (size_t c = 0; c < cases.size(); ++c)
    for (int k : {2, 8, 32}) {
      expect_same(speculative(s, oracle, in, cases[c], {k, false}), plain(s, in, cases[c]),
                  "case " + std::to_string(c) + " k=" + std::to_string(k));
      LookupDrafter lookup(1, 3);
      expect_same(speculative(s, lookup, in, cases[c], {k, false}), plain(s, in, cases[c]),
                  "lookup case " + std::to_string(c) + " k=" + std::to_string(k));
    }
  // Cancellation: asked before each step; after the 5th question it says stop.
  int asked = 0;
  auto cancel = greedy(100);
  cancel.cancelled = [&] { return ++asked > 5; };
  auto r = speculative(s, oracle, in, cancel, {8, false});
  EXPECT_EQ(r.r.stop, GenerateResult::Stop::Cancelled);
  EXPECT_LT(r.r.tokens.size(), 100u);
  // A callback that stops early, and the cache afterwards: what plain
  // decoding leaves (every kept token but the last run).
  auto first3 = [&](Drafter& d) {
    s.reset();
    int pieces = 0;
    auto res = generate_speculative(s, d, in, greedy(50), {8, false}, [&](std::string_view) { return ++pieces < 3; });
    return std::make_pair(res, s.cached_tokens());
  };
  s.reset();
  int pieces = 0;
  auto want = s.generate(in, greedy(50), [&](std::string_view) { return ++pieces < 3; });
  auto want_cache = s.cached_tokens();
  auto [got, got_cache] = first3(oracle);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.stop, GenerateResult::Stop::Callback);
  EXPECT_EQ(got_cache, want_cache);
}

TEST(Speculative, ContextFullAsPlain) {
  const LoadedModel& m = stories();
  EncodeOptions eo;
  eo.add_bos = true;
  auto in = m.tokenizer->encode("Once upon a time", eo);
  Session s(m.model, m.tokenizer, 24, 1);
  auto want = plain(s, in, greedy(100));
  EXPECT_EQ(want.r.stop, GenerateResult::Stop::ContextFull);
  std::vector<int32_t> seq = in;
  seq.insert(seq.end(), want.r.tokens.begin(), want.r.tokens.end());
  ReplayDrafter oracle(seq);
  for (int k : {1, 8, 32}) expect_same(speculative(s, oracle, in, greedy(100), {k, false}), want, "k=" + std::to_string(k));
}

TEST(Speculative, LookupDrafterProposesTheContinuationOfTheLongestRecentMatch) {
  LookupDrafter d(1, 3);
  std::vector<int32_t> out;
  d.draft(std::vector<int32_t>{1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3}, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 9, 2}));  // "1 2 3" (longest) beats the more recent "2 3"
  d.draft(std::vector<int32_t>{1, 2, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3}, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 1, 2}));  // "2 3": its most recent earlier occurrence
  d.draft(std::vector<int32_t>{5, 6, 7}, 4, out);
  EXPECT_TRUE(out.empty());
  d.draft(std::vector<int32_t>{5, 6, 5}, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 5, 6, 5}));  // past the history's end: the loop "6 5" again
  d.draft(std::vector<int32_t>{7, 7, 7}, 5, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 7, 7, 7, 7}));  // "7 7" one back: a loop of one token
  d.draft(std::vector<int32_t>{5, 6, 5}, 0, out);
  EXPECT_TRUE(out.empty());
  EXPECT_THROW(LookupDrafter(0, 2), Error);
  EXPECT_THROW(LookupDrafter(3, 2), Error);
}

TEST(Speculative, PlannerFallsBackToPlainWhenDraftsFailAndGrowsBlocksWhenTheyHit) {
  BlockPlanner p(16, true);
  for (int n = 1; n <= 17; ++n) p.record_time(n, 1.0 + 0.1 * (n - 1));  // a cheap verify
  for (int i = 0; i < 40; ++i) p.record_acceptance(4, 0);
  EXPECT_EQ(p.choose(16), 0) << "rejections make speculation a loss";
  for (int i = 0; i < 40; ++i) p.record_acceptance(8, 8);
  EXPECT_GE(p.choose(16), 8);
  BlockPlanner slow(16, true);
  for (int n = 1; n <= 17; ++n) slow.record_time(n, static_cast<double>(n));  // verify costs k decode steps
  for (int i = 0; i < 40; ++i) slow.record_acceptance(8, 6);
  EXPECT_EQ(slow.choose(16), 0) << "no block can beat decoding when a verify costs k steps and some drafts fail";
  // The loss budget: drafted steps add their time over what plain decoding
  // takes for their tokens; while paused, a costly drafter explores only
  // when that loss plus the next draft's expected cost is within 2% of the
  // decode time. A drafter costing one decode step whose drafts all fail:
  // one draft per 100 plain steps.
  BlockPlanner costly(16, true);
  for (int n = 1; n <= 17; ++n) costly.record_time(n, 1.0);
  EXPECT_TRUE(costly.may_explore(0)) << "a free drafter always may";
  costly.record_draft_time(1.0, 0);
  costly.record_step(false, 1, 1.0);
  costly.record_step(true, 1, 2.0);  // a failed draft: one token in two steps' time
  EXPECT_DOUBLE_EQ(costly.loss(), 1.0);
  EXPECT_FALSE(costly.may_explore(1));
  EXPECT_TRUE(costly.speculation_loses()) << "the running loss is over budget";
  int plain_steps = 0;
  while (!costly.may_explore(0)) costly.record_step(false, 1, 1.0), ++plain_steps;
  EXPECT_EQ(plain_steps, 97) << "loss 1 and a draft of 1 are 2% of 100 steps' time (3 so far)";
  // A draft after 50 missed positions took 1 + 50 x 0.5: catching up costs
  // half a step per position, more than the 2% the budget grows by per
  // step, so a pause long enough to afford a draft never comes.
  costly.record_draft_time(26.0, 50);
  EXPECT_FALSE(costly.may_explore(200));
  for (int i = 0; i < 100000; ++i) costly.record_step(false, 1, 1.0);
  EXPECT_FALSE(costly.may_explore(100000 + 200));
  EXPECT_TRUE(costly.may_explore(0)) << "the draft alone would fit";
  costly.record_step(true, 4, 2.0);  // a paying draft: 4 tokens in two steps' time
  EXPECT_DOUBLE_EQ(costly.loss(), -1.0);
  // The prompt's catch-up (prepare) gives the first estimate, so not even
  // one exploring draft is made where catching up would exceed the budget.
  BlockPlanner prompt(16, true);
  for (int n = 1; n <= 17; ++n) prompt.record_time(n, 1.0);
  prompt.record_catch_up(50.0, 100);  // half a step per position
  prompt.record_draft_time(1.0, 0);
  for (int i = 0; i < 1000; ++i) prompt.record_step(false, 1, 1.0);
  EXPECT_TRUE(prompt.may_explore(0));
  EXPECT_FALSE(prompt.may_explore(1000));
  // The steps still expected count toward the budget: `room` tokens, but
  // no more than generated so far or kHorizonTokens (64), whichever is larger.
  BlockPlanner ahead(16, true);
  for (int n = 1; n <= 17; ++n) ahead.record_time(n, 1.0);
  ahead.record_draft_time(2.5, 0);
  ahead.record_step(false, 1, 1.0);
  EXPECT_FALSE(ahead.may_explore(0, 10)) << "2.5 > 2% of (1 + 10)";
  EXPECT_FALSE(ahead.may_explore(0, 100000)) << "an unknown length counts as 64 more tokens: 2.5 > 2% of 65";
  for (int i = 0; i < 99; ++i) ahead.record_step(false, 1, 1.0);
  EXPECT_FALSE(ahead.may_explore(0, 0)) << "2.5 > 2% of the 100 steps so far";
  EXPECT_FALSE(ahead.may_explore(0, 20)) << "2.5 > 2% of (100 + 20)";
  EXPECT_TRUE(ahead.may_explore(0, 30)) << "2.5 <= 2% of (100 + 30)";
  EXPECT_TRUE(ahead.may_explore(0, 100000)) << "100 steps so far: 100 more expected";
  // A verify of more rows than a plain step costs its extra time too.
  BlockPlanner rows(16, true);
  for (int n = 1; n <= 17; ++n) rows.record_time(n, 1.0 + 0.1 * (n - 1));
  for (int i = 0; i < 40; ++i) rows.record_acceptance(16, 16);
  rows.record_draft_time(0.9, 0);
  int steps = 0;
  for (; steps < 100; ++steps) rows.record_step(false, 1, 1.0);
  const int block = rows.choose(16);
  ASSERT_GT(block, 8);
  const double need = 0.9 + rows.cost(block + 1) - rows.cost(1);  // the draft and the rows beyond one
  EXPECT_FALSE(rows.may_explore(0)) << "the draft alone (0.9) is within 2% of 100 steps, with its verify not";
  while (!rows.may_explore(0) && steps < 1000) rows.record_step(false, 1, 1.0), ++steps;
  EXPECT_NEAR(0.02 * steps, need, 0.021);
  // A drafter's own estimate (DFlash: a draft as so many positions of
  // catch-up) makes it costly before it drafts: the first step is plain,
  // then no block pays and nothing is drafted where the draft cannot fit
  // the budget. A draft soon after another replaces the estimate; one after
  // a pause measures the catch-up instead.
  BlockPlanner est(16, true);
  est.expect_draft_cost(10.0);
  EXPECT_FALSE(est.costly_drafter()) << "no catch-up measured: no estimate";
  est.record_catch_up(0.1, 100);  // 1 ms a position
  est.expect_draft_cost(2000.0);  // 2 s a draft
  EXPECT_TRUE(est.costly_drafter()) << "expected costly before a decode step is measured";
  EXPECT_TRUE(est.wants_plain_step());
  for (int i = 0; i < BlockPlanner::kWarmSamples; ++i) {
    EXPECT_TRUE(est.wants_plain_step()) << "plain steps measured: " << i;
    est.record_time(1, 1.0);
    est.record_step(false, 1, 1.0);
  }
  EXPECT_TRUE(est.costly_drafter());
  EXPECT_FALSE(est.wants_plain_step());
  EXPECT_EQ(est.choose(16), 0) << "a 2-step draft with the prior acceptance does not pay";
  EXPECT_FALSE(est.may_explore(1, 127)) << "2 > 2% of 65 steps";
  EXPECT_TRUE(est.may_explore(1, 100000) == false);
  est.record_draft_time(3.0, 200);  // after a pause: 2 (the estimate) + 200 x 5 ms of catching up
  EXPECT_TRUE(est.costly_drafter());
  est.record_draft_time(0.02, 1);  // soon after: the draft's own cost
  EXPECT_FALSE(est.costly_drafter()) << "measured at 2% of a step";
  // One outlier (a preempted step) moves a measured time by at most 3x.
  BlockPlanner noisy(16, true);
  for (int i = 0; i < BlockPlanner::kWarmSamples; ++i) noisy.record_time(1, 1.0);
  noisy.record_time(1, 100.0);
  EXPECT_DOUBLE_EQ(noisy.cost(1), 0.8 + 0.2 * 3.0);
  // The first forwards after a prompt are slow (cold caches): the first
  // kWarmSamples (3) of a time give its fastest, then the average moves.
  BlockPlanner warm(16, true);
  for (double t : {0.8, 0.35, 0.5}) warm.record_time(1, t);
  EXPECT_DOUBLE_EQ(warm.cost(1), 0.35);
  warm.record_time(1, 0.25);
  EXPECT_DOUBLE_EQ(warm.cost(1), 0.8 * 0.35 + 0.2 * 0.25);
  // A costly drafter waits for those warm-up plain steps, unless its draft
  // pays even priced kColdFactor (4) times higher: a draft model at 2% of
  // a step per token drafts after one plain step, one at 50% waits for 3.
  for (double per_token : {0.02, 0.5}) {
    BlockPlanner p(16, true, DraftCost::PerToken);
    p.expect_draft_time(per_token);
    EXPECT_TRUE(p.wants_plain_step()) << "no plain step measured";
    for (int i = 0; i < BlockPlanner::kWarmSamples; ++i) {
      p.record_time(1, 1.0);
      p.record_step(false, 1, 1.0);
      EXPECT_EQ(p.wants_plain_step(), per_token > 0.1 && i + 1 < BlockPlanner::kWarmSamples) << per_token << " after " << i + 1;
    }
  }
  // Acceptance per position (a block draft's later positions are weaker):
  // the first draft always right and the second always wrong give blocks
  // of one, and the drafter is asked for one more token than that.
  BlockPlanner first(16, true);
  for (int n = 1; n <= 17; ++n) first.record_time(n, 1.0 + 0.1 * (n - 1));
  for (int i = 0; i < 40; ++i) first.record_acceptance(4, 1);
  EXPECT_GT(first.acceptance_rate(0), 0.9);
  EXPECT_LT(first.acceptance_rate(1), 0.1);
  EXPECT_EQ(first.choose(16), 1);
  EXPECT_EQ(first.draft_request(16), 16) << "drafting measured free (lookup): ask for everything";
  first.record_draft_time(0.5);  // half a decode step
  EXPECT_TRUE(first.costly_drafter());
  EXPECT_EQ(first.draft_request(16), 2);
  EXPECT_EQ(first.draft_request(1), 1);
  EXPECT_EQ(BlockPlanner(16, false).draft_request(9), 9);
  // End to end: a plain step is measured first and every 32 drafted steps;
  // drafted steps slower per token than plain ones make speculation lose.
  BlockPlanner g(16, true);
  for (int n = 1; n <= 17; ++n) g.record_time(n, 1.0);
  EXPECT_FALSE(g.wants_plain_step()) << "drafting not measured yet";
  g.record_draft_time(0.3);
  EXPECT_TRUE(g.wants_plain_step());
  for (int i = 0; i < BlockPlanner::kWarmSamples; ++i) g.record_step(false, 1, 1.0);  // plain: 1 token/s
  EXPECT_FALSE(g.wants_plain_step());
  EXPECT_FALSE(g.speculation_loses()) << "no drafted step measured yet";
  g.record_step(true, 2, 4.0);  // 0.5 token/s
  EXPECT_TRUE(g.speculation_loses());
  for (int i = 0; i < 40; ++i) g.record_step(true, 3, 1.0);
  EXPECT_FALSE(g.speculation_loses());
  EXPECT_TRUE(g.wants_plain_step()) << "32 drafted steps since the last plain one";
  EXPECT_FALSE(BlockPlanner(16, false).wants_plain_step());
  EXPECT_FALSE(BlockPlanner(16, false).speculation_loses());
  EXPECT_THROW(BlockPlanner(0, true), Error);
  EXPECT_THROW(BlockPlanner(33, true), Error);
}

// A draft model's draft costs one forward per token: the planner weighs a
// block of k against drafting k tokens, not against the last draft's
// length. Acceptance falling with the position (0.92 at the first, 0.48 at
// the tenth by the decayed counts), a cheap verify and a draft token at 0.15
// of a step: a block of 5 by the per-token cost, 9 by the per-draft one.
TEST(Speculative, PlannerCostsAModelDraftPerToken) {
  auto planner = [](DraftCost kind) {
    BlockPlanner p(16, true, kind);
    for (int n = 1; n <= 17; ++n) p.record_time(n, 1.0 + 0.05 * (n - 1));
    for (int i = 0; i < 200; ++i) p.record_acceptance(16, i % 10 == 0 ? 16 : std::min(i % 10, 16));
    return p;
  };
  BlockPlanner tok = planner(DraftCost::PerToken), whole = planner(DraftCost::PerDraft);
  tok.record_draft_time(1.2, 0, 8);  // 8 tokens drafted in 1.2 steps' time
  whole.record_draft_time(1.2, 0, 8);
  EXPECT_DOUBLE_EQ(tok.draft_cost(1), 0.15);
  EXPECT_DOUBLE_EQ(tok.draft_cost(4), 0.6);
  EXPECT_DOUBLE_EQ(whole.draft_cost(1), 1.2);
  EXPECT_DOUBLE_EQ(whole.draft_cost(4), 1.2);
  // The per-token planner's block is the best by its own model, evaluated
  // here from the outside (expected tokens over draft plus verify time) ...
  auto rate = [&](int k) {
    double expected = 1, ak = 1;
    for (int i = 0; i < k; ++i) ak *= tok.acceptance_rate(i), expected += ak;
    return k == 0 ? 1.0 / tok.cost(1) : expected / (0.15 * k + tok.cost(k + 1));
  };
  const int k = tok.choose(16);
  ASSERT_GT(k, 0) << "a cheap verify and good drafts pay";
  for (int j = 0; j <= 16; ++j) EXPECT_LE(rate(j), rate(k) + 1e-12) << "block " << j << " beats the choice " << k;
  // ... and shorter than the block a per-draft cost would choose, where
  // drafting 2 tokens looks as dear as drafting 8.
  EXPECT_LT(k, whole.choose(16));
  EXPECT_EQ(tok.draft_request(16), k + 1);
  // A draft after a pause: its tokens' cost is taken off before the rest
  // counts as catching up on the missed positions.
  BlockPlanner pause(16, true, DraftCost::PerToken);
  for (int i = 0; i < 40; ++i) pause.record_acceptance(4, 0);  // drafts fail: paused, a 1-token exploring draft
  pause.record_draft_time(0.4, 0, 4);     // 0.1 a token
  pause.record_draft_time(4.4, 100, 4);   // 0.4 of drafting, 4.0 over 100 missed positions
  pause.record_time(1, 1.0);
  for (int i = 0; i < 100; ++i) pause.record_step(false, 1, 1.0);
  EXPECT_DOUBLE_EQ(pause.draft_cost(1), 0.1) << "the draft after the pause is not a draft's own cost";
  ASSERT_EQ(pause.choose(16), 0);
  EXPECT_TRUE(pause.may_explore(45, 0)) << "0.1 x 1 + 0.04 x 45 <= 2% of 100 steps";
  EXPECT_FALSE(pause.may_explore(50, 0)) << "0.1 + 0.04 x 50 > 2";
  // An estimate of a whole draft (expect_draft_cost) is spread over its rows.
  BlockPlanner est(16, true, DraftCost::PerToken);
  est.record_catch_up(0.1, 100);
  est.expect_draft_cost(400.0, 16);  // 16 rows cost 400 positions of catch-up: 0.4 s
  EXPECT_DOUBLE_EQ(est.draft_cost(16), 0.4);
  EXPECT_DOUBLE_EQ(est.draft_cost(1), 0.025);
}

// A drafted step's loss is taken against what a plain step costs now, not
// against the plain steps' average alone: that average moves only on plain
// steps, which are rare while a costly drafter explores. As measured on
// pocket-mini's PQ4 file drafting for itself: the one plain step after the
// prompt was slow (0.47 ms, caches cold), the forward then settled at
// 0.26 ms, and exploring steps took 0.46 ms for one token each.
TEST(Speculative, PlannerChargesExploringDraftsAgainstTheCurrentPlainRate) {
  BlockPlanner p(16, true, DraftCost::PerToken);
  p.record_time(1, 0.42e-3);
  p.record_time(2, 0.50e-3);
  p.record_draft_time(0.18e-3, 0, 1);
  p.record_step(false, 1, 0.47e-3);  // the early plain step: 0.05 ms beyond its forward
  int explored = 0;
  for (int step = 0; step < 60; ++step) {
    p.record_time(1, 0.26e-3);
    if (p.may_explore(1, 120 - step)) {
      p.record_draft_time(0.18e-3, 1, 1);
      p.record_step(true, 1, 0.46e-3);
      ++explored;
    } else {
      p.record_step(false, 1, 0.30e-3);
    }
  }
  // Each exploring step loses 0.46 ms less a plain step's current price:
  // the forward's average (falling from 0.42 to 0.26 ms) plus the overhead's
  // (0.05 falling towards 0.04 ms). The budget, 2% of the decode time so far
  // plus 64 steps ahead, allows a handful; priced by the plain steps'
  // average alone (0.47 ms, then moving only on plain steps) every step
  // explored.
  EXPECT_GE(explored, 2);
  EXPECT_LE(explored, 8);
  EXPECT_GT(p.loss(), 0.4e-3);
  EXPECT_LE(p.loss(), 0.02 * (p.elapsed() + 64 * 0.30e-3) + 0.2e-3) << "within the budget plus one step's overshoot";
  EXPECT_TRUE(p.speculation_loses());
}

// A draft model far dearer than the target (10 ms a drafted token against
// stories260K's sub-millisecond steps): its one token timed after the
// prompt's probe tells the planner before the first step, which is plain,
// and no draft is ever made in the loop (one would cost more than the 2%
// loss budget of the whole run). Before, the first step drafted --draft-max
// tokens blind. The output is plain greedy decoding's.
class SlowDraftModel : public Drafter {
 public:
  const char* name() const override { return "slow"; }
  DraftCost draft_cost_kind() const override { return DraftCost::PerToken; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override {
    out.clear();
    for (int i = 0; i < max; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      out.push_back(history.back());
    }
    ++drafts;
  }
  void prepare(std::span<const int32_t> history) override { prepared = history.size(); }
  int drafts = 0;
  size_t prepared = 0;
};

TEST(Speculative, ADraftModelThatCannotPayIsNeverRunInTheLoop) {
  POCKET_SKIP_WHEN_EMULATED("the planner's decisions come from wall time, which emulation distorts");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 256, 1);
  std::vector<int32_t> in = test::some_tokens(100, m.model->config().vocab_size, 5);
  const auto want = plain(s, in, greedy(40));
  SlowDraftModel slow;
  SpeculativeStats st;
  expect_same(speculative(s, slow, in, greedy(40), {8, true}, &st), want, "slow draft model");
  EXPECT_EQ(slow.drafts, 1) << "only the timed token after the probe";
  EXPECT_EQ(slow.prepared, kCatchUpProbe) << "the prompt's rest is never caught up";
  EXPECT_EQ(st.drafted, 0);
  EXPECT_EQ(st.verify_steps, 0);
  EXPECT_GT(st.prompt_draft_seconds, 0.009);
}

// Sampling: the first two generated tokens of speculative sampling (a fixed
// draft verified for the second) against the exact joint distribution
// computed from the model's own logits, over many seeds.
TEST(Speculative, SamplingKeepsTheDistribution) {
  POCKET_SKIP_WHEN_EMULATED("3000 short generations; the rule is ISA-independent");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 64, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  auto in = m.tokenizer->encode("Once upon a time there was a", eo);
  GenerateOptions o = test::top4_sampling();
  // Exact joint p(t1, t2) over the top-4 truncations.
  int32_t fixed_draft = -1;
  const auto exact = test::exact_pair_distribution(s, in, o.sampling, nullptr, &fixed_draft);
  Repeat drafter(fixed_draft, 1);
  test::expect_pair_frequencies(s, drafter, in, o, exact, 3000, 1500);
}


// Constraints: greedy constrained speculative output equals constrained
// plain output with the model-free drafters: an oracle replaying the
// constrained output (everything accepted), the unconstrained output
// (drafts the matcher cuts), a corrupted replay and prompt lookup.
TEST(SpeculativeConstrained, GreedyMatchesPlainWithModelFreeDrafters) {
  POCKET_SKIP_WHEN_EMULATED("masks and acceptance are ISA-independent; the greedy tests run per level");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 256, 2);
  const auto cases = test::constraint_cases(*m.tokenizer);
  const std::vector<int> blocks = {1, 4, 16};
  test::ConstrainedTotals total;
  for (const auto& in : prompts(m, 4)) {
    const auto free_run = plain(s, in, greedy(48));
    std::vector<int32_t> free_seq = in;
    free_seq.insert(free_seq.end(), free_run.r.tokens.begin(), free_run.r.tokens.end());
    ReplayDrafter unconstrained(free_seq);
    CorruptedReplay corrupted(free_seq, in.size(), 3, m.model->config().vocab_size);
    LookupDrafter lookup(1, 3);
    for (Drafter* d : std::vector<Drafter*>{&unconstrained, &corrupted, &lookup}) {
      auto t = test::expect_constrained_greedy_as_plain(s, *d, in, cases, 48, blocks);
      total.drafted += t.drafted;
      total.accepted += t.accepted;
      total.complete += t.complete;
    }
    for (const auto& c : cases) {  // the oracle of each constrained output: every draft accepted
      GenerateOptions o = greedy(48);
      o.constraint = c.compiled;
      s.reset();
      const auto want = s.generate(in, o);
      std::vector<int32_t> seq = in;
      seq.insert(seq.end(), want.tokens.begin(), want.tokens.end());
      ReplayDrafter oracle(seq);
      const auto t = test::expect_constrained_greedy_as_plain(s, oracle, in, {c}, 48, blocks);
      EXPECT_EQ(t.accepted, t.drafted) << constrain::kind_name(c.spec.kind);
      EXPECT_GT(t.drafted, 0);
    }
  }
  // A drafter proposing only a token the regex and choice cases never allow
  // (a digit):
  // every draft is cut before verify, so nothing is drafted.
  const auto digit = m.tokenizer->encode("7");
  ASSERT_FALSE(digit.empty());
  Repeat always(digit.back(), 32);
  std::vector<test::ConstraintCase> no_digits;
  for (const auto& c : cases)
    if (c.spec.kind == constrain::ConstraintSpec::Kind::Regex || c.spec.kind == constrain::ConstraintSpec::Kind::Choice)
      no_digits.push_back(c);
  const auto cut = test::expect_constrained_greedy_as_plain(s, always, prompts(m, 1)[0], no_digits, 24, {4});
  EXPECT_EQ(cut.drafted, 0) << "drafts the constraint rejects reached verify";
  EXPECT_GT(total.complete, 0) << "no constrained output completed: validity was never checked";
  EXPECT_GT(total.drafted, total.accepted) << "no draft was rejected";
  EXPECT_GT(total.accepted, 0);
}

// Sampling under a constraint: the first two tokens of speculative sampling
// (a fixed allowed draft verified for the second) against the exact joint
// distribution of the masked, truncated logits, over many seeds.
TEST(SpeculativeConstrained, SamplingKeepsTheMaskedDistribution) {
  POCKET_SKIP_WHEN_EMULATED("2000 short generations; the rule is ISA-independent");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 64, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  auto in = m.tokenizer->encode("Once upon a time there was a", eo);
  constrain::ConstraintSpec spec;
  spec.kind = constrain::ConstraintSpec::Kind::Regex;
  spec.text = " [b-z][a-z]*( [b-z][a-z]*)+";  // words not starting with 'a': masks the likeliest tokens
  auto constraint = constrain::compile_constraint(spec, *m.tokenizer);
  GenerateOptions o = test::top4_sampling();
  o.constraint = constraint;
  constrain::Matcher matcher = constraint->matcher();
  int32_t fixed_draft = -1;
  const auto exact = test::exact_pair_distribution(s, in, o.sampling, &matcher, &fixed_draft);
  Repeat drafter(fixed_draft, 1);
  test::expect_pair_frequencies(s, drafter, in, o, exact, 2000, 500);
}

}  // namespace
}  // namespace pocket
