#include "eval/metrics.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace pocket::eval {

double log_sum_exp(std::span<const float> logits) {
  if (logits.empty()) fail("log_sum_exp: no logits");
  const double mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(s);
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) fail("argmax: no logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double kl_divergence(std::span<const float> ref_logits, std::span<const float> model_logits) {
  if (ref_logits.size() != model_logits.size())
    fail("kl_divergence: ", ref_logits.size(), " reference logits but ", model_logits.size(), " model logits");
  const double lse_ref = log_sum_exp(ref_logits), lse_model = log_sum_exp(model_logits);
  double kl = 0;
  for (size_t i = 0; i < ref_logits.size(); ++i) {
    const double log_p = ref_logits[i] - lse_ref;
    const double log_q = model_logits[i] - lse_model;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative sum for equal distributions
}

double NllSum::perplexity() const { return std::exp(mean()); }

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const size_t n = values.size();
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  const size_t index = rank == 0 ? 0 : rank - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
  return values[index];
}

}  // namespace pocket::eval
