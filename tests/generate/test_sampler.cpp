#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "generate/sampler.h"
#include "util/error.h"

namespace pocket {
namespace {

std::vector<float> logits_of(std::initializer_list<float> l) { return std::vector<float>(l); }

TEST(Sampler, GreedyPicksTheLargestLogit) {
  SamplerConfig c;
  c.temperature = 0;
  Sampler s(c);
  auto l = logits_of({0.1f, 2.0f, -1.0f, 1.9f});
  EXPECT_EQ(s.sample(l, {}), 1);
}

// The lane-parallel argmax against std::max_element (largest value, lowest
// index on ties) on every length up to 300 and a vocabulary-sized row, with
// values from a small set so that ties are everywhere.
TEST(Sampler, ArgmaxIsTheFirstLargestValue) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);
  for (size_t n : std::vector<size_t>{1, 2, 7, 15, 16, 17, 31, 64, 65, 299, 300, 64064}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> v(n);
      for (auto& x : v) x = 0.5f * static_cast<float>(small(rng));
      if (rep % 2) v[rng() % n] = 9.0f;  // a unique maximum somewhere
      EXPECT_EQ(argmax(v), std::max_element(v.begin(), v.end()) - v.begin()) << "n=" << n << " rep=" << rep;
    }
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  auto draw = [&](uint64_t seed) {
    c.seed = seed;
    Sampler s(c);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = logits_of({0, 0, 0, 0, 0, 0, 0, 0});
      out.push_back(s.sample(l, {}));
    }
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTemperature) {
  // 40,000 draws: each frequency within 0.015 of its probability (> 5 sigma).
  SamplerConfig c;
  c.temperature = 0.5f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = 3;
  Sampler s(c);
  std::vector<float> base{1.0f, 0.5f, 0.0f, -0.5f};
  std::vector<double> p(4);
  double z = 0;
  for (int i = 0; i < 4; ++i) z += (p[i] = std::exp(base[i] / 0.5));
  std::vector<int> count(4);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    ++count[s.sample(l, {})];
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(count[i] / double(n), p[i] / z, 0.015) << i;
}

TEST(Sampler, TopKTopPAndMinPNeverPickExcludedTokens) {
  auto never = [](SamplerConfig c, std::vector<float> base, std::vector<int> excluded) {
    Sampler s(c);
    for (int i = 0; i < 3000; ++i) {
      auto l = base;
      int32_t t = s.sample(l, {});
      for (int e : excluded) ASSERT_NE(t, e);
    }
  };
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.top_k = 2;
  never(c, {3, 2.9f, 2.8f, 2.7f}, {2, 3});
  c.top_k = 0;
  c.top_p = 0.5f;  // probabilities ~ {0.6, 0.22, 0.08, ...}: only token 0 is in the nucleus
  never(c, {2, 1, 0, -1}, {1, 2, 3});
  c.top_p = 1.0f;
  c.min_p = 0.3f;  // p1/p0 = e^-1 = 0.37 kept, p2/p0 = e^-2 = 0.14 dropped
  never(c, {2, 1, 0, -1}, {2, 3});
}

// candidates() sorts only what an order is needed for (the top-k, a
// growing prefix for top-p, nothing without either): the set it keeps and
// each weight must equal a plain reference that sorts the whole vocabulary
// by logit, softmaxes the top-k in double, then cuts min-p and top-p.
// Tolerance on the weights: 1e-5 relative (the sampler's exp takes a float
// argument of up to ~60 in magnitude, rounded to ~4e-6, and sums in another
// order).
TEST(Sampler, CandidatesEqualAFullSortReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int V = 5000;
  int cases = 0;
  for (int top_k : {0, 1, 40, V})
    for (float top_p : {1.0f, 0.999f, 0.9f, 0.5f})
      for (float min_p : {0.0f, 0.05f})
        for (float temp : {0.5f, 1.0f, 1.7f}) {
          std::vector<float> logits(V);
          for (float& x : logits) x = nd(rng);
          std::vector<std::pair<float, int32_t>> ref(V);
          for (int i = 0; i < V; ++i) ref[i] = {logits[i], i};
          std::sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
          ref.resize(top_k > 0 ? std::min(top_k, V) : V);
          const double best = ref[0].first;
          double z = 0;
          for (auto& c : ref) z += std::exp((c.first - best) / temp);
          for (auto& c : ref) c.first = static_cast<float>(std::exp((c.first - best) / temp) / z);
          const float top = ref[0].first;
          std::erase_if(ref, [&](auto& c) { return c.first < min_p * top; });
          if (top_p < 1.0f) {
            double mass = 0;
            size_t keep = 0;
            while (keep < ref.size() && (mass += ref[keep++].first) < top_p) {
            }
            ref.resize(keep);
          }
          SamplerConfig c;
          c.temperature = temp, c.top_k = top_k, c.top_p = top_p, c.min_p = min_p;
          Sampler s(c);
          auto got_span = s.candidates(logits, {});
          std::vector<std::pair<float, int32_t>> got(got_span.begin(), got_span.end());
          SCOPED_TRACE(testing::Message() << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p << " T " << temp);
          ASSERT_EQ(got.size(), ref.size());
          std::sort(got.begin(), got.end(), [](auto& a, auto& b) { return a.second < b.second; });
          std::sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.second < b.second; });
          for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_EQ(got[i].second, ref[i].second);
            ASSERT_NEAR(got[i].first, ref[i].first, 1e-5 * ref[i].first) << "token " << ref[i].second;
          }
          ++cases;
        }
  EXPECT_EQ(cases, 96);
}

TEST(Sampler, RepetitionPenaltyDiscouragesRecentTokens) {
  SamplerConfig c;
  c.temperature = 0;
  c.repeat_penalty = 1.5f;
  Sampler s(c);
  std::vector<int32_t> history{0};
  auto l = logits_of({2.0f, 1.5f});  // 2.0 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(s.sample(l, history), 1);
  auto neg = logits_of({-1.0f, -1.2f});  // negative logits are multiplied: -1.5 < -1.2
  EXPECT_EQ(s.sample(neg, history), 1);
}

TEST(Sampler, InvalidSettingsAreRejected) {
  auto bad = [](auto mutate) {
    SamplerConfig c;
    mutate(c);
    EXPECT_THROW(Sampler{c}, Error);
  };
  bad([](SamplerConfig& c) { c.temperature = -1; });
  bad([](SamplerConfig& c) { c.temperature = NAN; });
  bad([](SamplerConfig& c) { c.top_p = 0; });
  bad([](SamplerConfig& c) { c.top_p = 1.5f; });
  bad([](SamplerConfig& c) { c.min_p = -0.1f; });
  bad([](SamplerConfig& c) { c.top_k = -3; });
  bad([](SamplerConfig& c) { c.repeat_penalty = 0; });
}

}  // namespace
}  // namespace pocket
