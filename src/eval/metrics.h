// Per-position quantities of a language-model evaluation, computed in double
// from raw logits: the log-probability of the actual next token, the KL
// divergence between a reference distribution and a model's, and argmax.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pocket::eval {

// log(sum(exp(logits))), stable for any finite logits.
double log_sum_exp(std::span<const float> logits);

// Index of the largest logit (the first one on ties).
int32_t argmax(std::span<const float> logits);

// KL(P_ref || P_model) = sum_i p_ref(i) * (log p_ref(i) - log p_model(i)),
// both distributions the softmax of the given logits. Never negative.
double kl_divergence(std::span<const float> ref_logits, std::span<const float> model_logits);

// Running totals over scored positions.
struct NllSum {
  double sum = 0;     // sum of -log p(actual next token)
  int64_t count = 0;  // scored positions
  void add(double nll) { sum += nll, ++count; }
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  double perplexity() const;  // exp(mean)
};

// The q-quantile (0..1) of `values` by the nearest-rank method; 0 when empty.
double quantile(std::vector<double> values, double q);

}  // namespace pocket::eval
