#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "util/error.h"

namespace pocket {

void SamplerConfig::validate() const {
  constexpr ErrorCode kBad = ErrorCode::InvalidArgument;
  if (!(temperature >= 0.0f) || temperature > 100.0f) fail_as(kBad, "temperature ", temperature, " must be in [0, 100]");
  if (top_k < 0) fail_as(kBad, "top-k ", top_k, " must be >= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail_as(kBad, "top-p ", top_p, " must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail_as(kBad, "min-p ", min_p, " must be in [0, 1]");
  if (!(repeat_penalty > 0.0f) || repeat_penalty > 100.0f) fail_as(kBad, "repeat penalty ", repeat_penalty, " must be in (0, 100]");
  if (repeat_last_n < 0) fail_as(kBad, "repeat-last-n ", repeat_last_n, " must be >= 0");
}

Sampler::Sampler(const SamplerConfig& cfg) : cfg_(cfg), rng_(cfg.seed) { cfg_.validate(); }

int32_t argmax(std::span<const float> logits) {
  // Eight independent running maxima (lane i sees indices = i mod 8, the
  // first of equal values kept) instead of one compare chain: a vocabulary
  // row of 64K-152K logits is read at the speed of the loads. The lanes
  // combine to the largest value, lowest index on ties: std::max_element's
  // answer (NaN logits aside).
  constexpr size_t kLanes = 8;
  const size_t n = logits.size();
  if (n < 2 * kLanes) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  float best[kLanes];
  size_t at[kLanes];
  for (size_t l = 0; l < kLanes; ++l) best[l] = logits[l], at[l] = l;
  size_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l)
      if (logits[i + l] > best[l]) best[l] = logits[i + l], at[l] = i + l;
  size_t r = at[0];
  for (size_t l = 1; l < kLanes; ++l)
    if (best[l] > logits[r] || (best[l] == logits[r] && at[l] < r)) r = at[l];
  for (; i < n; ++i)
    if (logits[i] > logits[r]) r = i;
  return static_cast<int32_t>(r);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  auto cands = candidates(logits, history);
  return cfg_.temperature == 0.0f ? cands[0].second : draw(cands);
}

std::span<const std::pair<float, int32_t>> Sampler::candidates(std::span<float> logits,
                                                               std::span<const int32_t> history) {
  const int n = static_cast<int>(logits.size());
  if (cfg_.repeat_penalty != 1.0f && cfg_.repeat_last_n > 0) {
    size_t start = history.size() > static_cast<size_t>(cfg_.repeat_last_n) ? history.size() - cfg_.repeat_last_n : 0;
    std::unordered_set<int32_t> seen(history.begin() + start, history.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n) continue;
      float& l = logits[t];
      l = l > 0 ? l / cfg_.repeat_penalty : l * cfg_.repeat_penalty;
    }
  }
  if (cfg_.temperature == 0.0f) {
    cand_.assign(1, {1.0f, argmax(logits)});
    return cand_;
  }

  // Candidates cut by top-k, then softmax at temperature, then min-p and
  // top-p. The vocabulary is never sorted whole: top-k sorts its k, top-p
  // sorts a growing prefix until it holds the nucleus, and with neither
  // (the OpenAI defaults) the draw needs no order (a full sort of a 151K
  // vocabulary cost 18-37 ms per row, more than a 0.3B model's step).
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i], i};
  auto by_weight = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  const int k = cfg_.top_k > 0 ? std::min(cfg_.top_k, n) : n;
  bool sorted = false;
  if (k < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), by_weight);
    cand_.resize(k);
    sorted = true;
  }
  float max_l = cand_[0].first;
  for (const auto& c : cand_) max_l = std::max(max_l, c.first);
  double sum = 0.0;
  for (auto& c : cand_) sum += (c.first = std::exp((c.first - max_l) / cfg_.temperature));
  for (auto& c : cand_) c.first = static_cast<float>(c.first / sum);

  // min-p: drop tokens below min_p times the most likely one (whose weight
  // is exp(0) / sum); the order of the rest is kept.
  if (cfg_.min_p > 0.0f) {
    const float cut = cfg_.min_p * static_cast<float>(1.0 / sum);
    std::erase_if(cand_, [cut](const auto& c) { return c.first < cut; });
  }
  // top-p: the smallest prefix (by weight) whose mass reaches top_p.
  if (cfg_.top_p < 1.0f) {
    if (!sorted) {
      for (size_t m = std::min<size_t>(64, cand_.size());; m = std::min(cand_.size(), m * 8)) {
        std::partial_sort(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(m), cand_.end(), by_weight);
        double mass = 0.0;
        for (size_t i = 0; i < m; ++i) mass += cand_[i].first;
        if (mass >= cfg_.top_p || m == cand_.size()) break;
      }
    }
    double mass = 0.0;
    size_t keep = 0;
    while (keep < cand_.size()) {
      mass += cand_[keep++].first;
      if (mass >= cfg_.top_p) break;
    }
    cand_.resize(keep);
  }
  return cand_;
}

int32_t Sampler::draw(std::span<const std::pair<float, int32_t>> cands, int32_t exclude) {
  double total = 0.0;
  for (const auto& c : cands)
    if (c.second != exclude) total += c.first;
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  int32_t last = -1;
  for (const auto& c : cands) {
    if (c.second == exclude || !(c.first > 0)) continue;  // a masked (-inf) logit has weight 0: never drawn
    last = c.second;
    r -= c.first;
    if (r < 0) return c.second;
  }
  return last >= 0 ? last : exclude;  // nothing else to draw
}

bool Sampler::chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }

}  // namespace pocket
