// Speculative decoding (this folder): drafters propose tokens, the target
// model verifies a whole block in one batched forward (Session::verify),
// the longest prefix the target agrees with is kept and the KV cache rolled
// back past the rest (Session::rollback). Greedy acceptance is lossless
// because the forward pass is batch-invariant (tests/model/test_batch_invariance.cpp).
// With tree verification (SpeculativeOptions::tree_nodes) a drafter
// proposes a tree of candidates (draft_tree), verified in one pass
// (Session::verify_tree, each node exactly as decoding its path) and the
// accepted path's keys/values copied into the cache (Session::accept_tree).
//
// This header: the drafter interface and the drafters that need no model.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "speculative/planner.h"

namespace pocket {

class NgramCache;
class ThreadPool;
struct TensorView;

// A draft's matrices are small: below about 2M multiply-adds a matmul runs
// on the calling thread, where waking the pool would cost more than it
// saves (results are the same for any thread count).
void draft_matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool);

// Candidate continuations as a tree (tree verification): nodes in
// depth-first preorder, parents[i] the index of node i's parent or -1 for
// a first token (a child of the current position). The first root-to-leaf
// chain is the drafter's best guess.
struct DraftTree {
  std::vector<int32_t> tokens;
  std::vector<int> parents;
  size_t size() const { return tokens.size(); }
  void clear() { tokens.clear(), parents.clear(); }
  // Builds the tree of `branches` (token sequences; shared prefixes are one
  // path, the first branch is the first chain, children in order of first
  // appearance), at most max_nodes nodes (later branches are cut short).
  void assign(std::span<const std::vector<int32_t>> branches, int max_nodes);
  // Depth of each node (1 for a first token).
  std::vector<int> depths() const;
  // The first chain's tokens.
  std::vector<int32_t> first_chain() const;
  // Keeps the nodes of depth <= max_depth.
  void prune(int max_depth);
  // Keeps the first n nodes (still a tree: a preorder's prefix holds every
  // node's ancestors).
  void truncate(size_t n) {
    if (n < size()) tokens.resize(n), parents.resize(n);
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // Proposes up to `max` tokens to follow `history` (prompt and generated
  // tokens so far) into `out` (cleared first); none is a valid answer.
  virtual void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) = 0;
  // Called after the prompt is prefilled, with the prompt or (a drafter
  // with a cost estimate, below, or DraftCost::PerToken) its first
  // kCatchUpProbe tokens, and again
  // with the tokens run so far when drafting starts to pay: a drafter with
  // per-position state catches up on them here, so that the one-time cost
  // is not taken for the cost of every draft. `history` is always tokens
  // the target has run.
  virtual void prepare(std::span<const int32_t> history) { (void)history; }
  // A draft of `rows` tokens after `context` positions costs about this
  // many positions of prepare()'s catch-up (by multiply-adds): with the
  // catch-up's measured time, the planner knows a draft's cost before the
  // first one is made. 0: no estimate (no per-position state, or unknown).
  virtual double draft_cost_in_catch_ups(int rows, int context) const {
    (void)rows, (void)context;
    return 0.0;
  }
  // How a draft's cost grows with its length (the planner's cost model):
  // by default one pass for any length (lookup, a block drafter).
  virtual DraftCost draft_cost_kind() const { return DraftCost::PerDraft; }
  // Several candidate continuations as a tree of at most max_nodes nodes
  // and max_depth levels (tree verification). By default, draft()'s chain.
  virtual void draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out);
};

// Prompt lookup: the longest suffix of the history (ngram_max tokens down
// to ngram_min) that occurred before, most recent occurrence first, and
// the tokens that followed it there (continued periodically past the end of
// the history: a loop of p tokens drafts the loop, not only p tokens). Costs microseconds; pays on rewriting,
// quoting, code edits and chat about a document.
// With an n-gram cache (speculative/ngram_cache.h), a history without a
// match drafts the cache's continuation of its last tokens instead.
class LookupDrafter : public Drafter {
 public:
  explicit LookupDrafter(int ngram_min = 2, int ngram_max = 4, std::shared_ptr<const NgramCache> cache = nullptr);
  const char* name() const override { return "lookup"; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override;
  // Every earlier occurrence of the longest matching suffix (most recent
  // first), then of shorter ones, each continuation a branch.
  void draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) override;

 private:
  int ngram_min_, ngram_max_;
  std::shared_ptr<const NgramCache> cache_;
};

// The oracle: replays a known continuation (the target's own greedy output),
// so every drafted token is accepted; gives the ceiling speed-up of a block
// size. Proposes nothing once the history leaves the sequence.
class ReplayDrafter : public Drafter {
 public:
  explicit ReplayDrafter(std::vector<int32_t> sequence) : seq_(std::move(sequence)) {}
  const char* name() const override { return "oracle"; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override;

 private:
  std::vector<int32_t> seq_;
};

}  // namespace pocket
