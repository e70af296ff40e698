// Using heads and the model itself to decide: classify (a trained head),
// route (classify with the out-of-scope threshold), zero-shot classify
// (log-likelihood of each label's verbalisation after the prompt) and rank
// (candidates after a query, by a trained pointwise head or by their
// length-normalised log-likelihood). The query's or prompt's KV cache is
// computed once and shared by every candidate; each candidate then costs one
// prefill of its own tokens. Every decision is one prefill: no decoding.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "heads/features.h"
#include "heads/head.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pocket::heads {

struct Prediction {
  std::string label;         // the chosen label (the head's other_label when routed out of scope)
  int index = -1;            // its index in the head's labels; -1 when out of scope
  float probability = 0;     // of the top label
  bool out_of_scope = false;
  std::vector<float> probs;  // every label's probability, in the head's order
  int tokens = 0;            // input tokens processed
};

struct Ranked {
  int index = 0;  // position in the candidate list
  double score = 0;
};

// Log-probabilities of continuations after a prefix: sum over the
// continuation's tokens and count.
struct ContinuationScore {
  double logprob = 0;
  int tokens = 0;
  double mean() const { return tokens ? logprob / tokens : 0.0; }
};

// Scores each continuation after `prefix`. With share_prefix the prefix runs
// once and its KV cache is reused (rolled back) for every continuation; without
// it each continuation runs with a full prefill of prefix + continuation (the
// plain reference path the tests compare against).
std::vector<ContinuationScore> score_continuations(const Model& model, Context& ctx, ThreadPool& pool,
                                                   std::span<const int32_t> prefix,
                                                   const std::vector<std::vector<int32_t>>& continuations,
                                                   bool share_prefix = true);

class Scorer {
 public:
  Scorer(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tok, int threads, int max_tokens = 512);

  const Tokenizer& tokenizer() const { return *tok_; }
  const Model& model() const { return runner_.model(); }
  int max_tokens() const { return max_tokens_; }

  // Features of one input as a head with `spec` sees them.
  std::vector<float> features(const std::string& text, const FeatureSpec& spec);
  Prediction classify(const Head& head, const std::string& text);
  // classify, then out of scope when the top probability is below the
  // head's threshold (or `threshold` when >= 0).
  Prediction route(const Head& head, const std::string& text, float threshold = -1.0f);
  // Zero-shot: the prompt is `tmpl` applied to the text; each label's
  // verbalisation (" " + label unless given) is scored by mean token
  // log-probability, and the scores are softmaxed into probabilities.
  Prediction zero_shot(const std::string& text, const std::vector<std::string>& labels, const std::string& tmpl,
                       const std::vector<std::string>& verbalisations = {});
  // Ranking, best first. By log-likelihood: mean log-probability of each
  // candidate's tokens after the query (prompt `tmpl` applied to the query).
  std::vector<Ranked> rank_loglik(const std::string& query, const std::vector<std::string>& candidates,
                                  const std::string& tmpl = "", bool share_prefix = true);
  // By a trained pointwise head (pairs: query then candidate; the score is
  // the probability of the head's `positive` label, default its last label).
  std::vector<Ranked> rank_head(const Head& head, const std::string& query, const std::vector<std::string>& candidates,
                                const std::string& positive = "", bool share_prefix = true);

  // Prompt tokens as the zero-shot/rank scorers build them.
  std::vector<int32_t> prompt_tokens(const std::string& tmpl, const std::string& text) const;
  // The tokens `cont` adds after `prompt_text`: the tail of encode(prompt +
  // cont) when it extends encode(prompt) (so a SentencePiece dummy space or a
  // BPE merge across the join is what the model would really see), else
  // encode(cont) on its own.
  std::vector<int32_t> continuation_tokens(const std::string& prompt_text, const std::vector<int32_t>& prompt,
                                           const std::string& cont) const;

 private:
  std::shared_ptr<const Tokenizer> tok_;
  int max_tokens_;
  FeatureRunner runner_;
};

// Sorts by score, best first (ties: earlier candidate first).
std::vector<Ranked> sort_ranked(const std::vector<double>& scores);

}  // namespace pocket::heads
