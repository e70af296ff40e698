// A small random vocabulary for matcher tests: every single byte of the
// units, then random concatenations of units cut at random byte offsets (so
// tokens split multi-byte characters), then one end-of-sequence token.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "constrain/vocab_index.h"

namespace pocket::constrain {

inline std::shared_ptr<const VocabIndex> test_vocab(const std::vector<std::string>& units, int extra, std::mt19937& rng) {
  std::vector<std::string> toks;
  for (auto& u : units)
    for (char c : u)
      if (std::find(toks.begin(), toks.end(), std::string(1, c)) == toks.end()) toks.push_back(std::string(1, c));
  for (int i = 0; i < extra; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) s += units[rng() % units.size()];
    const size_t a = rng() % s.size();
    const size_t len = 1 + rng() % (s.size() - a);
    toks.push_back(s.substr(a, len));  // duplicates allowed: several ids, same bytes
  }
  toks.push_back("");  // the end-of-sequence id (no bytes)
  const int32_t eos = static_cast<int32_t>(toks.size()) - 1;
  return VocabIndex::build(toks, {}, {eos});
}

}  // namespace pocket::constrain
