#include "speculative/model_drafter.h"

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
  out.clear();
  if (max <= 0 || history.empty()) return;
  max = std::min<int>(max, session_.context_size() - static_cast<int>(history.size()));
  seq_.assign(history.begin(), history.end());
  for (int i = 0; i < max; ++i) {
    const std::span<float> logits = session_.prefill(seq_);  // runs only what is not cached
    const int32_t t = argmax(logits);
    out.push_back(t);
    if (i + 1 == max) break;
    if (min_confidence_ > 0) {
      double z = 0;
      for (float l : logits) z += std::exp(static_cast<double>(l) - logits[static_cast<size_t>(t)]);
      if (1.0 / z < min_confidence_) break;
    }
    seq_.push_back(t);
  }
}

}  // namespace pocket
