// A plain reference recognizer for the tests: Earley parsing over the
// grammar form (independent of the matcher's stacks, interning and masks).
// viable(bytes): some string of the grammar starts with these bytes;
// accepts(bytes): the bytes are a complete match.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "constrain/grammar.h"

namespace pocket::constrain::test {

class Earley {
 public:
  explicit Earley(const Grammar& grammar) : g_(expand_repeats(grammar)), nullable_(g_.rules.size(), false) {
    const Grammar& g = g_;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.rules.size(); ++r) {
        if (nullable_[r]) continue;
        for (auto& a : g.rules[r].alts) {
          bool all = true;
          for (auto& e : a) all = all && e.is_ref && nullable_[e.index];
          if (all) {
            nullable_[r] = changed = true;
            break;
          }
        }
      }
    }
  }

  // (viable, accepts)
  std::pair<bool, bool> run(std::string_view bytes) const {
    using Item = std::tuple<int, int, int, int>;  // rule, alt, dot, origin
    std::vector<std::set<Item>> sets(bytes.size() + 1);
    // Per set: the items waiting for each rule (dot before a reference).
    std::vector<std::vector<std::vector<Item>>> waiting(bytes.size() + 1, std::vector<std::vector<Item>>(g_.rules.size()));
    for (int a = 0; a < static_cast<int>(g_.rules[g_.root].alts.size()); ++a) sets[0].insert({g_.root, a, 0, 0});
    for (size_t i = 0; i <= bytes.size(); ++i) {
      std::vector<Item> work(sets[i].begin(), sets[i].end());
      auto add = [&](const Item& it) {
        if (sets[i].insert(it).second) work.push_back(it);
      };
      while (!work.empty()) {
        auto [r, a, dot, org] = work.back();
        work.pop_back();
        const Seq& seq = g_.rules[r].alts[a];
        if (dot == static_cast<int>(seq.size())) {  // complete
          const std::vector<Item> w = waiting[org][r];
          for (auto& [r2, a2, d2, o2] : w) add({r2, a2, d2 + 1, o2});
          continue;
        }
        const Elem& e = seq[dot];
        if (e.is_ref) {
          waiting[i][e.index].push_back({r, a, dot, org});
          for (int a2 = 0; a2 < static_cast<int>(g_.rules[e.index].alts.size()); ++a2) add({e.index, a2, 0, static_cast<int>(i)});
          if (nullable_[e.index]) add({r, a, dot + 1, org});
        }
      }
      if (i == bytes.size()) break;
      const auto b = static_cast<uint8_t>(bytes[i]);
      for (auto& [r, a, dot, org] : sets[i]) {
        const Seq& seq = g_.rules[r].alts[a];
        if (dot < static_cast<int>(seq.size()) && !seq[dot].is_ref && g_.sets[seq[dot].index].test(b))
          sets[i + 1].insert({r, a, dot + 1, org});
      }
      if (sets[i + 1].empty()) return {false, false};
    }
    bool acc = false;
    for (auto& [r, a, dot, org] : sets.back())
      if (r == g_.root && org == 0 && dot == static_cast<int>(g_.rules[r].alts[a].size())) acc = true;
    return {true, acc};
  }

 private:
  Grammar g_;
  std::vector<bool> nullable_;
};

}  // namespace pocket::constrain::test
