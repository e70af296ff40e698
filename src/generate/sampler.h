// Token sampling: greedy, temperature, top-k, top-p, min-p and repetition
// penalty, driven by a seeded generator so runs are reproducible.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace pocket {

struct SamplerConfig {
  float temperature = 0.8f;  // 0 = greedy
  int top_k = 40;            // 0 = off
  float top_p = 0.95f;       // 1 = off
  float min_p = 0.05f;       // 0 = off; keep tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;  // 1 = off; >1 discourages recent tokens (llama.cpp / CTRL rule)
  int repeat_last_n = 64;
  uint64_t seed = 0;

  // Throws pocket::Error naming the option that is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg);

  // Picks the next token from `logits` (modified in place by the penalty).
  // `history` is the sequence so far (for the repetition penalty).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The steps of sample(), for speculative decoding's rejection rule:
  // candidates() returns the (weight, id) pairs sample() draws from (the
  // penalty, temperature and truncation applied; weights not renormalised;
  // one pair of weight 1 when greedy); draw() picks one of them in
  // proportion to its weight, skipping `exclude`; chance(p) is true with
  // probability p.
  std::span<const std::pair<float, int32_t>> candidates(std::span<float> logits, std::span<const int32_t> history);
  int32_t draw(std::span<const std::pair<float, int32_t>> cands, int32_t exclude = -1);
  bool chance(double p);

 private:
  SamplerConfig cfg_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

// Index of the largest value (lowest index on ties).
int32_t argmax(std::span<const float> logits);

}  // namespace pocket
