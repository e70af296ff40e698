// Tree verification (Session::verify_tree / accept_tree, Model::forward_tree)
// and tree speculation: every node's logits bit-identical to one-token
// decoding of its root-to-node path (random trees on stories260K, a
// random-weight Qwen3-shaped model, the q8 and q4 caches); the cache after
// accepting a path identical to plain decoding's (decoding continues the
// same); greedy tree speculation token for token as plain greedy; tree
// sampling against the exact distribution; the drafters' trees; bad trees
// and options as clear errors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "convert/create_model.h"
#include "runtime/loader.h"
#include "sampling_check.h"
#include "speculative/drafter.h"
#include "shared_models.h"
#include "speculative/speculative.h"
#include "util/error.h"

namespace pocket {
namespace {

using test::stories;
using test::synthetic_qwen3;

struct Tree {
  std::vector<int32_t> tokens;
  std::vector<int> parents;
};

// A random tree of n nodes in depth-first preorder: each node's parent is
// drawn from the path to the node before it.
Tree random_tree(int n, int vocab, uint64_t seed) {
  test::Rng rng(seed);
  Tree t;
  std::vector<int> path;
  for (int i = 0; i < n; ++i) {
    int parent = -1;
    if (i > 0) {
      path.resize(1 + rng.next() % path.size());
      parent = path.back();
    }
    t.parents.push_back(parent);
    t.tokens.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab)));
    path.push_back(i);
  }
  return t;
}

std::vector<int> path_to(const Tree& t, int node) {
  std::vector<int> p;
  for (int u = node; u >= 0; u = t.parents[static_cast<size_t>(u)]) p.insert(p.begin(), u);
  return p;
}

// Logits of the last token of `seq` decoded one token at a time after `prefix` is prefilled.
std::vector<float> decode_last(Session& s, const std::vector<int32_t>& prefix, const std::vector<int32_t>& seq) {
  s.reset();
  std::span<float> l = s.prefill(prefix);
  std::vector<int32_t> run = prefix;
  for (size_t i = prefix.size(); i < seq.size(); ++i) {
    run.push_back(seq[i]);
    l = s.prefill(run);  // reuses the cache: a one-token step
  }
  return {l.begin(), l.end()};
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every node of several random trees (sizes 1..64, after prompts of several
// lengths) against one-token decoding of its path; then accepting one path
// and decoding on gives plain decoding's logits (tolerance: none, bitwise).
void check_tree_logits(const LoadedModel& m, KVType kv, int trees) {
  const int V = m.model->config().vocab_size;
  const int vocab = std::min(m.tokenizer->vocab_size(), V);
  Session tree_s(m.model, m.tokenizer, 256, 2, 0, kv), plain_s(m.model, m.tokenizer, 256, 2, 0, kv);
  ASSERT_TRUE(tree_s.tree_verifiable());
  int branched = 0;
  for (int c = 0; c < trees; ++c) {
    const int n = std::vector<int>{12, 40, 2, 64, 5, 23, 1}[static_cast<size_t>(c) % 7];  // few trees (qemu): branchy first
    const Tree t = random_tree(n, vocab, 1000 + c);
    const auto prefix = test::some_tokens(1 + (c * 7) % 30, vocab, 77 + c);
    tree_s.reset();
    tree_s.prefill(prefix);
    std::span<float> rows = tree_s.verify_tree(t.tokens, t.parents);
    ASSERT_EQ(rows.size(), static_cast<size_t>(n) * V);
    const std::vector<float> got(rows.begin(), rows.end());
    for (int i = 0; i < n; ++i) {
      if (i > 0 && t.parents[static_cast<size_t>(i)] != i - 1) ++branched;
      std::vector<int32_t> seq = prefix;
      for (int u : path_to(t, i)) seq.push_back(t.tokens[static_cast<size_t>(u)]);
      const auto want = decode_last(plain_s, prefix, seq);
      EXPECT_TRUE(same_bits(std::span<const float>(got).subspan(static_cast<size_t>(i) * V, V), want))
          << "tree " << c << " (" << n << " nodes) node " << i;
    }
    // Accept the path to the last node (the deepest chain of the last
    // segment, or another one), then decode three more tokens.
    const int chosen = static_cast<int>((c * 5) % n);
    const auto path = path_to(t, chosen);
    tree_s.accept_tree(path);
    std::vector<int32_t> seq = prefix;
    for (int u : path) seq.push_back(t.tokens[static_cast<size_t>(u)]);
    EXPECT_EQ(tree_s.cached_tokens(), seq);
    const auto more = test::some_tokens(3, vocab, 5000 + c);
    std::span<float> after = tree_s.verify(more);
    const std::vector<float> got_after(after.begin(), after.end());
    for (size_t j = 0; j < more.size(); ++j) {
      seq.push_back(more[j]);
      const auto want = decode_last(plain_s, prefix, seq);
      EXPECT_TRUE(same_bits(std::span<const float>(got_after).subspan(j * V, V), want))
          << "tree " << c << ": decoding after accepting node " << chosen << ", token " << j;
    }
  }
  EXPECT_GE(branched, trees) << "the random trees had too few branches";
}

// Under qemu (test.sh's no-avx512 and aarch64 stages) fewer trees and runs:
// the kernels are what differs, and a few branchy trees take every path.
TEST(TreeVerify, EveryNodeMatchesDecodingItsPathOnStories) {
  check_tree_logits(stories(), KVType::F16, test::emulated() ? 3 : 14);
}
TEST(TreeVerify, EveryNodeMatchesDecodingItsPathOnSyntheticQwen3) {
  check_tree_logits(synthetic_qwen3(), KVType::F16, test::emulated() ? 4 : 10);
}
TEST(TreeVerify, EveryNodeMatchesDecodingItsPathWithQ8AndQ4Caches) {
  check_tree_logits(stories(), KVType::Q8, test::emulated() ? 3 : 7);
  check_tree_logits(stories(), KVType::Q4, test::emulated() ? 3 : 7);
}

// With hidden-state taps (DFlash drafts read them): every node's logits are
// still its path's, and after accepting a path the taps at its positions
// are bit for bit those a plain prefill of the same tokens writes (the
// taps of the rejected nodes go nowhere).
TEST(TreeVerify, AcceptedPathsTapsEqualAPlainPrefills) {
  const LoadedModel& m = synthetic_qwen3();
  const int V = m.model->config().vocab_size, L = m.model->config().n_layers;
  const int vocab = std::min(m.tokenizer->vocab_size(), V);
  const size_t row = 2 * static_cast<size_t>(m.model->config().dim);
  Session tree_s(m.model, m.tokenizer, 256, 2), plain_s(m.model, m.tokenizer, 256, 2);
  tree_s.enable_hidden_taps({0, L - 1});
  plain_s.enable_hidden_taps({0, L - 1});
  ASSERT_TRUE(tree_s.tree_verifiable());
  const int trees = test::emulated() ? 2 : 6;
  for (int c = 0; c < trees; ++c) {
    const int n = std::vector<int>{12, 40, 5, 23, 64, 2}[static_cast<size_t>(c)];
    const Tree t = random_tree(n, vocab, 2000 + c);
    const auto prefix = test::some_tokens(1 + (c * 11) % 30, vocab, 170 + c);
    tree_s.reset();
    tree_s.prefill(prefix);
    std::span<float> rows = tree_s.verify_tree(t.tokens, t.parents);
    const int chosen = static_cast<int>((c * 7 + 3) % n);
    const auto path = path_to(t, chosen);
    std::vector<int32_t> seq = prefix;
    for (int u : path) seq.push_back(t.tokens[static_cast<size_t>(u)]);
    const auto want = decode_last(plain_s, prefix, seq);
    EXPECT_TRUE(same_bits(rows.subspan(static_cast<size_t>(chosen) * V, V), want)) << "tree " << c << " node " << chosen;
    tree_s.accept_tree(path);
    plain_s.reset();
    plain_s.prefill(seq);
    for (size_t p = 0; p < seq.size(); ++p)
      EXPECT_TRUE(same_bits(std::span<const float>(tree_s.hidden_taps(static_cast<int>(p)), row),
                            std::span<const float>(plain_s.hidden_taps(static_cast<int>(p)), row)))
          << "tree " << c << " (" << n << " nodes), path to node " << chosen << ", position " << p;
  }
}

TEST(TreeVerify, BadTreesAndOptionsAreClearErrors) {
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 32, 1);
  s.prefill(std::vector<int32_t>{1, 2, 3});
  auto bad = [&](std::vector<int32_t> tokens, std::vector<int> parents) {
    EXPECT_THROW(s.verify_tree(tokens, parents), Error);
    EXPECT_EQ(s.cached_tokens().size(), 3u);
  };
  bad({}, {});
  bad({5, 6}, {-1});                  // sizes differ
  bad({5, 6}, {0, -1});               // the root is node 0
  bad({5, 6, 7}, {-1, 0, 2});         // a parent after the node
  bad({5, 6, 7, 8}, {-1, 0, 0, 1});   // node 3's parent is not on the path to node 2: not preorder
  bad({5, 99999}, {-1, 0});           // outside the vocabulary
  bad(std::vector<int32_t>(65, 5), std::vector<int>(65, 0));  // more than kMaxTreeNodes
  std::vector<int> chain(40);
  for (int i = 0; i < 40; ++i) chain[static_cast<size_t>(i)] = i - 1;
  bad(std::vector<int32_t>(40, 5), chain);  // deeper than the context left
  EXPECT_THROW(s.accept_tree(std::vector<int>{0}), Error) << "nothing verified";
  s.verify_tree(std::vector<int32_t>{5, 6, 7}, std::vector<int>{-1, 0, 0});
  EXPECT_THROW(s.accept_tree(std::vector<int>{1}), Error) << "a path starts at the root";
  EXPECT_THROW(s.accept_tree(std::vector<int>{0, 1, 2}), Error) << "2 is not 1's child";
  s.accept_tree(std::vector<int>{0, 2});
  EXPECT_EQ(s.cached_tokens(), (std::vector<int32_t>{1, 2, 3, 5, 7}));
  EXPECT_THROW(s.accept_tree(std::vector<int>{0}), Error) << "accepted twice";
  s.verify_tree(std::vector<int32_t>{5, 6}, std::vector<int>{-1, 0});
  s.rollback(4);
  EXPECT_THROW(s.accept_tree(std::vector<int>{0}), Error) << "the cache moved on";
  for (int bad_nodes : {-1, 1, 64, 1000}) {
    SpeculativeOptions so;
    so.tree_nodes = bad_nodes;
    EXPECT_THROW(check_speculative_options(so), Error) << bad_nodes;
  }
}

TEST(TreeVerify, DraftTreeIsPreorderWithSharedPrefixesAndNodeLimit) {
  DraftTree t;
  std::vector<std::vector<int32_t>> br = {{1, 2, 3}, {1, 2, 4, 5}, {6}, {1, 7}, {1, 2, 3, 9}};
  t.assign(br, 64);
  // 1 -> 2 -> {3 -> 9, 4 -> 5}, 1 -> 7, 6: preorder with children in order of appearance.
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 2, 3, 9, 4, 5, 7, 6}));
  EXPECT_EQ(t.parents, (std::vector<int>{-1, 0, 1, 2, 1, 4, 0, -1}));
  EXPECT_EQ(t.first_chain(), (std::vector<int32_t>{1, 2, 3, 9}));
  EXPECT_EQ(t.depths(), (std::vector<int>{1, 2, 3, 4, 3, 4, 2, 1}));
  t.prune(2);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 2, 7, 6}));
  EXPECT_EQ(t.parents, (std::vector<int>{-1, 0, 0, -1}));
  t.assign(br, 5);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(t.parents, (std::vector<int>{-1, 0, 1, 1, 3}));
  // Lookup: every earlier occurrence of the longest suffix, most recent first.
  LookupDrafter d(1, 3);
  const std::vector<int32_t> h = {1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 2, 3, 6, 1, 2, 3};
  d.draft_tree(h, 3, 64, t);
  std::vector<int32_t> chain;
  d.draft(h, 3, chain);
  EXPECT_EQ(t.first_chain(), chain) << "the first chain is draft()'s";
  // "1 2 3" -> {7 8 2, 4 5 9}, then "2 3" -> {6 1 2} (7 8 2 again), then "3" -> the same.
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{7, 8, 2, 4, 5, 9, 6, 1, 2}));
  EXPECT_EQ(t.parents, (std::vector<int>{-1, 0, 1, -1, 3, 4, -1, 6, 7}));
}

// A drafter whose tree holds the right continuation only as its second
// branch, under a wrong first chain and beside a corrupted one, so the
// accepted path leaves the first chain at various depths.
class HiddenTruth : public Drafter {
 public:
  HiddenTruth(std::vector<int32_t> seq, int vocab) : seq_(std::move(seq)), vocab_(vocab) {}
  const char* name() const override { return "hidden-truth"; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override {
    DraftTree t;
    draft_tree(history, max, 64, t);
    out = t.first_chain();
  }
  void draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) override {
    std::vector<int32_t> truth;
    for (size_t i = history.size(); i < seq_.size() && static_cast<int>(truth.size()) < max_depth; ++i)
      truth.push_back(seq_[i]);
    if (truth.empty()) return out.clear();
    auto wrong = truth, late = truth;
    const size_t at = ++calls_ % truth.size();
    wrong[at] = (wrong[at] + 1) % vocab_;  // diverges at a varying depth
    late[truth.size() - 1] = (late.back() + 2) % vocab_;
    std::vector<std::vector<int32_t>> br = {wrong, truth, late};
    out.assign(br, max_nodes);
  }

 private:
  std::vector<int32_t> seq_;
  int vocab_;
  size_t calls_ = 0;
};

using test::greedy;

void check_greedy_tree(const LoadedModel& m, int n_prompts, int n_tokens) {
  const int V = m.model->config().vocab_size;
  const int vocab = std::min(m.tokenizer->vocab_size(), V);
  Session s(m.model, m.tokenizer, 256, 2);
  int trees = 0, accepted = 0, drafted = 0;
  EncodeOptions eo;
  eo.add_bos = m.tokenizer->vocab().add_bos;
  std::vector<std::vector<int32_t>> ins;
  for (const char* t : {"Once upon a time", "The cat sat on the mat. The cat sat on the", "Tom and Lily went to the park. Tom"})
    ins.push_back(m.tokenizer->encode(t, eo));
  for (int i = 0; static_cast<int>(ins.size()) < n_prompts; ++i) ins.push_back(test::some_tokens(3 + i % 9, vocab, 300 + i));
  for (const auto& in : ins) {
    s.reset();
    const auto want = s.generate(in, greedy(n_tokens));
    std::vector<int32_t> seq = in;
    seq.insert(seq.end(), want.tokens.begin(), want.tokens.end());
    HiddenTruth hidden(seq, vocab);
    LookupDrafter lookup(1, 3);
    const bool emulated = test::emulated();
    for (Drafter* d : std::vector<Drafter*>{&hidden, &lookup})
      for (int k : emulated ? std::vector<int>{8} : std::vector<int>{2, 8, 16})
        for (int nodes : emulated ? std::vector<int>{16} : std::vector<int>{4, 16, 63}) {
          SpeculativeOptions so{k, false, nodes};
          SpeculativeStats st;
          s.reset();
          const auto got = generate_speculative(s, *d, in, greedy(n_tokens), so, {}, &st);
          const std::string what = std::string(d->name()) + " k=" + std::to_string(k) + " nodes=" + std::to_string(nodes);
          EXPECT_EQ(got.tokens, want.tokens) << what;
          EXPECT_EQ(got.text, want.text) << what;
          EXPECT_EQ(got.stop, want.stop) << what;
          // The cache as plain decoding leaves it: decoding goes on the same.
          EXPECT_EQ(s.cached_tokens().size(), in.size() + want.tokens.size() - (want.stop == GenerateResult::Stop::Eos ? 0 : 1))
              << what;
          trees += st.tree_steps;
          drafted += st.drafted;
          accepted += st.accepted;
          if (d == &hidden && want.stop == GenerateResult::Stop::MaxTokens && nodes >= 2 * k + 1) {
            EXPECT_GE(st.accepted * (k + 1), (n_tokens - 1 - k) * k) << what << ": the true branch was not followed";
          }
        }
    for (Drafter* d : std::vector<Drafter*>{&hidden, &lookup}) {  // adaptive: the planner sizes the tree
      s.reset();
      const auto got = generate_speculative(s, *d, in, greedy(n_tokens), SpeculativeOptions{16, true, 32});
      EXPECT_EQ(got.tokens, want.tokens) << d->name() << " adaptive";
    }
  }
  EXPECT_GT(trees, test::emulated() ? 3 : 20);
  EXPECT_GT(drafted, accepted);
  EXPECT_GT(accepted, 0);
}

TEST(TreeSpeculation, GreedyMatchesPlainOnStories) {
  check_greedy_tree(stories(), test::emulated() ? 1 : 10, test::emulated() ? 24 : 40);
}
TEST(TreeSpeculation, GreedyMatchesPlainOnSyntheticQwen3) {
  check_greedy_tree(synthetic_qwen3(), test::emulated() ? 1 : 4, 24);
}

// Proposes fixed first tokens, each a child of the current position.
class Fan : public Drafter {
 public:
  explicit Fan(std::vector<int32_t> firsts) : firsts_(std::move(firsts)) {}
  const char* name() const override { return "fan"; }
  void draft(std::span<const int32_t>, int max, std::vector<int32_t>& out) override {
    out.assign(firsts_.begin(), firsts_.begin() + std::min<size_t>(max > 0 ? 1 : 0, firsts_.size()));
  }
  void draft_tree(std::span<const int32_t>, int max_depth, int max_nodes, DraftTree& out) override {
    std::vector<std::vector<int32_t>> br;
    if (max_depth > 0)
      for (int32_t t : firsts_) br.push_back({t});
    out.assign(br, max_nodes);
  }

 private:
  std::vector<int32_t> firsts_;
};

// Sampling over a tree: the second token is verified against three
// candidates (tried in turn, each against what the rejected ones leave);
// the first two tokens' frequencies over many seeds against the exact joint
// distribution (5 sigma).
TEST(TreeSpeculation, SamplingKeepsTheDistribution) {
  POCKET_SKIP_WHEN_EMULATED("3000 short generations; the rule is ISA-independent");
  const LoadedModel& m = stories();
  Session s(m.model, m.tokenizer, 64, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  auto in = m.tokenizer->encode("Once upon a time there was a", eo);
  GenerateOptions o = test::top4_sampling();
  int32_t likely = -1;
  const auto exact = test::exact_pair_distribution(s, in, o.sampling, nullptr, &likely);
  // The second token's candidates after the likeliest first token, in an
  // order that is not the model's, plus one outside the support.
  std::vector<int32_t> seconds;
  for (const auto& [cell, p] : exact)
    if (cell.second != likely && seconds.size() < 2) seconds.push_back(cell.second);
  Fan fan({seconds.empty() ? 1 : seconds[0], likely, 0});
  int accepted = 0;
  test::expect_pair_frequencies(s, fan, in, o, exact, 3000, 1500, &accepted, SpeculativeOptions{1, false, 3});
  EXPECT_GT(accepted, 300);
}

}  // namespace
}  // namespace pocket
