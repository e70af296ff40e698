// Draft-model speculation: a smaller model with the same vocabulary drafts
// greedily with its own KV cache, kept in step with the target's history
// (its session reuses the longest common prefix, so rejected drafts are
// rolled back without a copy). Drafting stops early when the draft's
// confidence in its next token drops below a threshold. With a draft
// vocabulary (speculative/draft_vocab.h) it runs without its full output
// head and scores only the ranking's first N tokens.
#pragma once
#include <memory>

#include "generate/session.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafter.h"

namespace pocket {

class ModelDrafter : public Drafter {
 public:
  // Throws unless `draft` and `target_tokenizer` have the same vocabulary.
  // `min_confidence`: stop after a drafted token whose probability under
  // the draft is below it (the first token is always drafted).
  ModelDrafter(std::shared_ptr<const Model> draft, std::shared_ptr<const Tokenizer> draft_tokenizer,
               const Tokenizer& target_tokenizer, int n_ctx, int n_threads, float min_confidence = 0.3f);
  // On the target session's pool (Session::shared_pool): the draft's
  // matmuls use the same worker threads, and no second set spins or yields
  // beside the target's forward (measured: pocket-mini's f16 folder with its
  // 2-layer draft, 1.29x -> 1.37x of plain decoding).
  ModelDrafter(std::shared_ptr<const Model> draft, std::shared_ptr<const Tokenizer> draft_tokenizer,
               const Tokenizer& target_tokenizer, int n_ctx, std::shared_ptr<ThreadPool> pool,
               float min_confidence = 0.3f);
  const char* name() const override { return "model"; }
  // One forward of the draft per drafted token.
  DraftCost draft_cost_kind() const override { return DraftCost::PerToken; }
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override;
  // Runs the draft over the history it has not seen (without its output
  // head), so the prompt's catch-up is timed apart from the first draft's
  // own cost.
  void prepare(std::span<const int32_t> history) override;
  // The greedy chain, plus, at each of its first `positions` positions,
  // the draft's next `alternatives` likeliest tokens (those with
  // probability >= min_probability under the draft) as one-token branches:
  // no extra draft pass, and a rejection there still gains a token when the
  // target picks the draft's second or third choice.
  void draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) override;
  struct Branching {
    int positions = 3, alternatives = 2;
    float min_probability = 0.05f;
  };
  void set_branching(const Branching& b) { branching_ = b; }
  // Score only the first n ids of `ranking` (their rows of the draft's head
  // gathered once); n = 0 or the whole vocabulary: the full head again.
  // Throws unless the ranking indexes the draft's vocabulary and holds n ids.
  void use_draft_vocab(const DraftVocab& ranking, int n);
  int draft_vocab() const { return subset_ ? subset_->size() : 0; }
  // Positions of the history whose keys/values the draft holds.
  size_t cached() const { return session_.cached_tokens().size(); }

 private:
  // The next token's logits over the draft vocabulary (index k is token
  // id_of(k)) after running `seq_`.
  std::span<const float> next_logits();
  int32_t id_of(int32_t k) const { return subset_ ? subset_->ids()[static_cast<size_t>(k)] : k; }
  // draft(); with `alts`, each position's alternatives (token, position).
  void draft_chain(std::span<const int32_t> history, int max, std::vector<int32_t>& out,
                   std::vector<std::pair<int32_t, int>>* alts);
  Session session_;
  float min_confidence_;
  Branching branching_;
  std::vector<int32_t> seq_;
  std::unique_ptr<const SubsetHead> subset_;
  std::vector<float> subset_logits_;
};

}  // namespace pocket
