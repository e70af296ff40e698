// Speculative sampling against the exact distribution, for any drafter: the
// first two generated tokens of many seeded runs against the joint
// distribution computed from the model's own logits (the sampler's
// candidates, masked by a constraint when one is given).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "constrain/constraint.h"
#include "generate/sampler.h"
#include "generate/session.h"
#include "speculative/speculative.h"

namespace pocket::test {

using PairDistribution = std::map<std::pair<int, int>, double>;

// The options these checks sample with: 3 tokens at temperature 1 over the
// top 4 (small supports, so 2000-3000 runs measure every pair).
inline GenerateOptions top4_sampling() {
  GenerateOptions o;
  o.max_tokens = 3;
  o.sampling.temperature = 1.0f;
  o.sampling.top_k = 4;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  return o;
}

// p(t1, t2) of plain sampling after `in` with `cfg`, masked by `matcher`
// (left where it was) when not null. `likely_second`, when not null, gets a
// likely but not certain second token (a useful fixed draft).
inline PairDistribution exact_pair_distribution(Session& s, const std::vector<int32_t>& in, const SamplerConfig& cfg,
                                                constrain::Matcher* matcher = nullptr, int32_t* likely_second = nullptr) {
  Sampler probe(cfg);
  auto candidates = [&](const std::vector<int32_t>& seq) {
    s.reset();
    auto l = s.prefill(seq);
    std::vector<float> row(l.begin(), l.end());
    if (matcher) apply_constraint(*matcher, row);
    auto c = probe.candidates(row, seq);
    return std::vector<std::pair<float, int32_t>>(c.begin(), c.end());
  };
  PairDistribution exact;
  const auto c1 = candidates(in);
  if (likely_second) *likely_second = -1;
  for (const auto& [p1, t1] : c1) {
    auto seq = in;
    seq.push_back(t1);
    if (matcher) {
      EXPECT_TRUE(matcher->advance(t1));
    }
    const auto c2 = candidates(seq);
    if (matcher) matcher->rollback(1);
    double z1 = 0, z2 = 0;
    for (auto& c : c1) z1 += c.first;
    for (auto& c : c2) z2 += c.first;
    for (const auto& [p2, t2] : c2) exact[{t1, t2}] = p1 / z1 * p2 / z2;
    if (likely_second && *likely_second < 0 && c2.size() > 1) *likely_second = c2[1].second;
  }
  return exact;
}

// Runs n seeded speculative generations (by default one drafted token
// verified per step; `spec`) and checks the frequencies of the first two generated tokens
// against `exact` (within 5 sigma), and that at least `min_verified` drafts
// were verified; `accepted`, when not null, gets the drafts accepted.
inline void expect_pair_frequencies(Session& s, Drafter& drafter, const std::vector<int32_t>& in, GenerateOptions o,
                                    const PairDistribution& exact, int n, int min_verified, int* accepted = nullptr,
                                    SpeculativeOptions spec = {1, false}) {
  std::map<std::pair<int, int>, int> seen;
  int verified = 0;
  for (int seed = 0; seed < n; ++seed) {
    o.sampling.seed = static_cast<uint64_t>(seed);
    SpeculativeStats st;
    s.reset();
    auto r = generate_speculative(s, drafter, in, o, spec, {}, &st);
    ASSERT_GE(r.tokens.size(), 2u);
    ++seen[{r.tokens[0], r.tokens[1]}];
    verified += st.drafted;
    if (accepted) *accepted += st.accepted;
  }
  EXPECT_GE(verified, min_verified);
  for (const auto& [cell, count] : seen) EXPECT_TRUE(exact.count(cell)) << "a pair outside the (masked, truncated) support";
  for (const auto& [cell, p] : exact) {
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(seen[cell], n * p, 5 * sigma + 2) << "pair " << cell.first << "," << cell.second;
  }
}

}  // namespace pocket::test
