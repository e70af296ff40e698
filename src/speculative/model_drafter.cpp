#include "speculative/model_drafter.h"

#include <algorithm>
#include <cmath>

#include "generate/sampler.h"
#include "util/error.h"

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
    : session_(std::move(draft), same_vocabulary(draft_tokenizer, target_tokenizer), n_ctx, n_threads),
      min_confidence_(min_confidence) {}

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
    const std::span<float> logits = session_.prefill(seq_);  // runs only what is not cached
    const int32_t t = argmax(logits);
    out.push_back(t);
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
        alts->push_back({b, i});
      }
    }
    if (i + 1 == max) break;
    if (min_confidence_ > 0 && 1.0 / z < min_confidence_) break;
    seq_.push_back(t);
  }
}

}  // namespace pocket
