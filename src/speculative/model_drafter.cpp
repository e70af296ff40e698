#include "speculative/model_drafter.h"

#include <algorithm>
#include <cmath>

#include "generate/sampler.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket {

namespace {

const std::shared_ptr<const Tokenizer>& same_vocabulary(const std::shared_ptr<const Tokenizer>& draft,
                                                        const Tokenizer& target) {
  if (draft->vocab().tokens != target.vocab().tokens)
    fail_as(ErrorCode::InvalidArgument, "the draft model's vocabulary (", draft->vocab_size(), " tokens) is not the target's (",
            target.vocab_size(), " tokens): a draft model must share the tokenizer");
  return draft;
}

}  // namespace

ModelDrafter::ModelDrafter(std::shared_ptr<const Model> draft, std::shared_ptr<const Tokenizer> draft_tokenizer,
                           const Tokenizer& target_tokenizer, int n_ctx, int n_threads, float min_confidence)
    : ModelDrafter(std::move(draft), std::move(draft_tokenizer), target_tokenizer, n_ctx,
                   std::make_shared<ThreadPool>(n_threads), min_confidence) {}

ModelDrafter::ModelDrafter(std::shared_ptr<const Model> draft, std::shared_ptr<const Tokenizer> draft_tokenizer,
                           const Tokenizer& target_tokenizer, int n_ctx, std::shared_ptr<ThreadPool> pool,
                           float min_confidence)
    : session_(std::move(draft), same_vocabulary(draft_tokenizer, target_tokenizer), n_ctx, std::move(pool)),
      min_confidence_(min_confidence) {}

void ModelDrafter::use_draft_vocab(const DraftVocab& ranking, int n) {
  const ModelConfig& c = session_.model().config();
  if (n < 0) fail_as(ErrorCode::InvalidArgument, "draft vocabulary size ", n, " must be >= 0 (0: the whole vocabulary)");
  if (ranking.vocab_size != c.vocab_size)
    fail_as(ErrorCode::InvalidArgument, "the draft vocabulary ranks a vocabulary of ", ranking.vocab_size,
            " tokens, the draft model has ", c.vocab_size);
  if (static_cast<size_t>(n) > ranking.ranked.size())
    fail_as(ErrorCode::InvalidArgument, "a draft vocabulary of ", n, " tokens, but the ranking holds ", ranking.ranked.size(),
            " (0 uses the whole vocabulary)");
  subset_.reset();
  if (n == 0 || n >= c.vocab_size) return;
  const ModelFile& f = session_.model().file();
  const TensorView& head = f.get(c.tied_embeddings ? "token_embd.weight" : "output.weight");
  subset_ = std::make_unique<const SubsetHead>(head, std::vector<int32_t>(ranking.ranked.begin(), ranking.ranked.begin() + n));
  subset_logits_.resize(static_cast<size_t>(n));
}

std::span<const float> ModelDrafter::next_logits() {
  if (!subset_) return session_.prefill(seq_);  // runs only what is not cached
  const std::span<const float> h = session_.prefill_hidden(seq_);
  draft_matmul(subset_->view(), h.data(), 1, subset_logits_.data(), session_.pool());
  if (const float cap = session_.model().config().final_softcap; cap > 0)
    for (float& z : subset_logits_) z = cap * std::tanh(z / cap);
  return subset_logits_;
}

void ModelDrafter::prepare(std::span<const int32_t> history) {
  if (!history.empty() && static_cast<int>(history.size()) <= session_.context_size()) session_.prefill_hidden(history);
}

void ModelDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  draft_chain(history, max, out, nullptr);
}

void ModelDrafter::draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) {
  std::vector<int32_t> chain;
  std::vector<std::pair<int32_t, int>> alts;
  draft_chain(history, max_depth, chain, &alts);
  std::vector<std::vector<int32_t>> branches(1, chain);
  for (const auto& [token, pos] : alts) {
    branches.emplace_back(chain.begin(), chain.begin() + pos);
    branches.back().push_back(token);
  }
  out.assign(branches, max_nodes);
}

void ModelDrafter::draft_chain(std::span<const int32_t> history, int max, std::vector<int32_t>& out,
                               std::vector<std::pair<int32_t, int>>* alts) {
  out.clear();
  if (alts) alts->clear();
  if (max <= 0 || history.empty()) return;
  max = std::min<int>(max, session_.context_size() - static_cast<int>(history.size()));
  seq_.assign(history.begin(), history.end());
  for (int i = 0; i < max; ++i) {
    const std::span<const float> logits = next_logits();
    const int32_t t = argmax(logits);  // an index into logits; id_of(t) is the token
    out.push_back(id_of(t));
    const bool branch = alts && i < branching_.positions;
    if (i + 1 == max && !branch) break;
    double z = 0;
    if (min_confidence_ > 0 || branch)
      for (float l : logits) z += std::exp(static_cast<double>(l) - logits[static_cast<size_t>(t)]);
    if (branch) {  // the next likeliest tokens, by probability relative to t's
      std::vector<int32_t> best;
      for (int a = 0; a < branching_.alternatives; ++a) {
        int32_t b = -1;
        for (int32_t j = 0; j < static_cast<int32_t>(logits.size()); ++j)
          if (j != t && std::find(best.begin(), best.end(), j) == best.end() &&
              (b < 0 || logits[static_cast<size_t>(j)] > logits[static_cast<size_t>(b)]))
            b = j;
        if (b < 0 || std::exp(static_cast<double>(logits[static_cast<size_t>(b)]) - logits[static_cast<size_t>(t)]) / z <
                         branching_.min_probability)
          break;
        best.push_back(b);
        alts->push_back({id_of(b), i});
      }
    }
    if (i + 1 == max) break;
    if (min_confidence_ > 0 && 1.0 / z < min_confidence_) break;
    seq_.push_back(id_of(t));
  }
}

}  // namespace pocket
