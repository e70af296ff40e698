#include "constrain/grammar.h"

#include <algorithm>

#include "util/error.h"

namespace pocket::constrain {

void GrammarBuilder::count(size_t n) {
  elems_ += n;
  if (elems_ > Limits::kMaxElems)
    fail_as(ErrorCode::InvalidArgument, "the constraint is too large: more than ", Limits::kMaxElems,
            " grammar elements (huge repetition counts or enums?)");
}

int GrammarBuilder::add_rule(std::string name) {
  g_.rules.push_back({std::move(name), {}});
  defined_.push_back(false);
  count(1);
  return static_cast<int>(g_.rules.size()) - 1;
}

void GrammarBuilder::define(int rule, Alts alts) {
  size_t n = 0;
  for (auto& a : alts) n += a.size() + 1;
  count(n);
  g_.rules[rule].alts = std::move(alts);
  defined_[rule] = true;
}

Elem GrammarBuilder::bytes(const ByteSet& s) {
  // Each distinct set is stored once (code point classes make thousands of
  // range sets, mostly repeats; a search over the last 64 missed the older ones).
  const auto [it, added] = set_index_.try_emplace(s, static_cast<int32_t>(g_.sets.size()));
  if (added) g_.sets.push_back(s);
  return {false, it->second};
}

Elem GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Seq GrammarBuilder::literal(std::string_view s) {
  Seq out;
  for (char c : s) out.push_back(byte(static_cast<uint8_t>(c)));
  return out;
}

namespace {
uint32_t utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* b, uint32_t n) {
  if (n == 1) {
    b[0] = static_cast<uint8_t>(cp);
    return;
  }
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (uint32_t i = n - 1; i > 0; --i) {
    b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
}

void split_same_len(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const uint32_t n = utf8_len(lo);
  for (uint32_t i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_len(lo, lo | m, out);
        split_same_len((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_len(lo, (hi & ~m) - 1, out);
        split_same_len(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (uint32_t i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}
}  // namespace

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return;
  // Surrogates have no UTF-8 form.
  if (lo < 0xD800 && hi >= 0xD800) {
    utf8_sequences(lo, 0xD7FF, out);
    utf8_sequences(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && lo <= 0xDFFF) {
    if (hi <= 0xDFFF) return;
    lo = 0xE000;
  }
  for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= bound && hi > bound) {
      split_same_len(lo, bound, out);
      utf8_sequences(bound + 1, hi, out);
      return;
    }
  }
  split_same_len(lo, hi, out);
}

std::vector<CpRange> GrammarBuilder::negate(std::vector<CpRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CpRange> out;
  uint32_t next = 0;
  for (auto [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

Alts GrammarBuilder::codepoints(std::vector<CpRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CpRange> merged;
  for (auto r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [lo, hi] : merged) utf8_sequences(lo, hi, seqs);
  // Single-byte sequences merge into one byte set; multi-byte ones with the
  // same tail merge on their first byte.
  Alts out;
  ByteSet ascii;
  for (auto& s : seqs) {
    if (s.size() == 1) {
      ascii.set_range(s[0].first, s[0].second);
      continue;
    }
    Seq seq;
    for (auto [a, b] : s) {
      ByteSet bs;
      bs.set_range(a, b);
      seq.push_back(bytes(bs));
    }
    out.push_back(std::move(seq));
  }
  if (!ascii.empty()) out.insert(out.begin(), Seq{bytes(ascii)});
  return out;
}

Elem GrammarBuilder::group(Alts alts, std::string_view hint) {
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  int r = add_rule(cat(hint, "#", g_.rules.size()));
  define(r, std::move(alts));
  return {true, r};
}

namespace {
// item{min,max} as plain rules appended to g: min copies of the item, then
// item* as a right-recursive rule (star ::= item star | "") or nested
// optionals (opt_k ::= item opt_{k-1} | "").
Seq write_out(Grammar& g, Elem item, int min, int max, std::string_view hint) {
  auto add = [&](std::string name, Alts alts) {
    g.rules.push_back({std::move(name), std::move(alts)});
    return static_cast<int32_t>(g.rules.size()) - 1;
  };
  Seq out(static_cast<size_t>(min), item);
  if (max < 0) {
    const int32_t star = static_cast<int32_t>(g.rules.size());
    add(cat(hint, "*#", star), {{item, {true, star}}, {}});
    out.push_back({true, star});
  } else {
    int32_t prev = -1;
    for (int k = 0; k < max - min; ++k) {
      Seq first{item};
      if (prev >= 0) first.push_back({true, prev});
      prev = add(cat(hint, "?#", g.rules.size()), {std::move(first), {}});
    }
    if (prev >= 0) out.push_back({true, prev});
  }
  return out;
}

// Writes out the Repeat elements for which keep(rep) is false, telling
// added(n) about every n elements added (it may throw to stop).
template <class Keep, class Added>
void expand_some(Grammar& g, Keep keep, Added added) {
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (size_t a = 0; a < g.rules[r].alts.size(); ++a) {
      Seq out;
      bool changed = false;
      for (const Elem& e : g.rules[r].alts[a]) {
        if (!e.is_rep || keep(g.reps[e.index])) {
          out.push_back(e);
          continue;
        }
        const Repeat rep = g.reps[e.index];
        added(static_cast<size_t>(rep.max < 0 ? rep.min + 5 : rep.min + 5 * (rep.max - rep.min)));
        Seq w = write_out(g, {true, rep.item}, rep.min, rep.max, "rep");
        out.insert(out.end(), w.begin(), w.end());
        changed = true;
      }
      if (changed) g.rules[r].alts[a] = std::move(out);
    }
}
}  // namespace

Grammar expand_repeats(Grammar g) {
  expand_some(g, [](const Repeat&) { return false; }, [](size_t) {});
  return g;
}

Seq GrammarBuilder::repeat(const Alts& x, int min, int max, std::string_view hint) {
  if (min < 0 || min > Limits::kMaxRepeat || max > Limits::kMaxRepeat)
    fail_as(ErrorCode::InvalidArgument, "repetition count ", std::max(min, max), " is too large (at most ",
            Limits::kMaxRepeat, ")");
  if (max >= 0 && max < min) fail_as(ErrorCode::InvalidArgument, "repetition {", min, ",", max, "}: max < min");
  Elem item = group(x, hint);
  if (max >= 2 || (max < 0 && min >= 2)) {  // counted: one element, the count kept by the matcher
    if (!item.is_ref) {
      const int r = add_rule(cat(hint, "#", g_.rules.size()));
      define(r, x);
      item = {true, r};
    }
    g_.reps.push_back({item.index, min, max});
    count(1);
    return {Elem{false, static_cast<int32_t>(g_.reps.size()) - 1, true}};
  }
  const size_t before = g_.rules.size();
  Seq out = write_out(g_, item, min, max, hint);
  defined_.resize(g_.rules.size(), true);
  size_t n = out.size();
  for (size_t r = before; r < g_.rules.size(); ++r) n += 4;
  count(n);
  return out;
}

Grammar GrammarBuilder::finish(int root) && {
  for (size_t r = 0; r < g_.rules.size(); ++r)
    if (!defined_[r]) fail_as(ErrorCode::InvalidArgument, "grammar: rule '", g_.rules[r].name, "' is used but never defined");
  // The matcher counts repetitions of items that consume at least one byte;
  // a repetition of a nullable item is written out as plain rules.
  {
    std::vector<bool> null0(g_.rules.size(), false);
    auto elem_null = [&](const Elem& e) {
      return e.is_rep ? g_.reps[e.index].min == 0 || null0[g_.reps[e.index].item] : e.is_ref && null0[e.index];
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g_.rules.size(); ++r)
        if (!null0[r])
          for (auto& a : g_.rules[r].alts)
            if (std::all_of(a.begin(), a.end(), elem_null)) {
              null0[r] = changed = true;
              break;
            }
    }
    expand_some(g_, [&](const Repeat& rep) { return !null0[rep.item]; }, [&](size_t n) { count(n); });
  }
  const size_t n = g_.rules.size();
  // Productive rules (can derive some finite string); drop alternatives that
  // use anything else, so every live parse can always be completed.
  std::vector<bool> prod(n, false);
  auto elem_ok = [&](const Elem& e) {
    if (e.is_rep) return g_.reps[e.index].min == 0 || prod[g_.reps[e.index].item];
    return e.is_ref ? static_cast<bool>(prod[e.index]) : !g_.sets[e.index].empty();
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (prod[r]) continue;
      for (auto& a : g_.rules[r].alts)
        if (std::all_of(a.begin(), a.end(), elem_ok)) {
          prod[r] = changed = true;
          break;
        }
    }
  }
  if (!prod[root])
    fail_as(ErrorCode::InvalidArgument, "grammar: rule '", g_.rules[root].name,
            "' matches nothing (no finite string satisfies it)");
  for (auto& rule : g_.rules)
    std::erase_if(rule.alts, [&](const Seq& a) { return !std::all_of(a.begin(), a.end(), elem_ok); });
  // Nullable rules, then left recursion: a rule reachable from itself
  // without consuming a byte would make the matcher loop.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (auto& a : g_.rules[r].alts)
        if (std::all_of(a.begin(), a.end(), [&](const Elem& e) {
              return e.is_rep ? g_.reps[e.index].min == 0 : e.is_ref && nullable[e.index];
            })) {
          nullable[r] = changed = true;
          break;
        }
    }
  }
  // Left calls: rule r may call rule s before consuming a byte. A call in
  // tail position (the last element) does not grow the matcher's stack, so
  // a cycle of tail calls only is harmless (e.g. (x?)*); a cycle through
  // any other call is left recursion, which would grow it forever.
  struct Edge {
    int to;
    bool tail;
  };
  std::vector<std::vector<Edge>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (auto& a : g_.rules[r].alts)
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].is_rep) {  // calls its item, then comes back for the count: never a tail call
          left[r].push_back({g_.reps[a[i].index].item, false});
          if (g_.reps[a[i].index].min > 0) break;
          continue;
        }
        if (!a[i].is_ref) break;
        left[r].push_back({a[i].index, i + 1 == a.size()});
        if (!nullable[a[i].index]) break;
      }
  // Strongly connected components (iterative Tarjan).
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1), stk;
  std::vector<bool> on(n, false);
  int next_index = 0, comps = 0;
  for (size_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    std::vector<std::pair<int, size_t>> call{{static_cast<int>(s), 0}};
    index[s] = low[s] = next_index++;
    stk.push_back(static_cast<int>(s));
    on[s] = true;
    while (!call.empty()) {
      auto& [v, i] = call.back();
      if (i < left[v].size()) {
        const int w = left[v][i++].to;
        if (index[w] < 0) {
          index[w] = low[w] = next_index++;
          stk.push_back(w);
          on[w] = true;
          call.emplace_back(w, 0);
        } else if (on[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        for (int w = -1; w != v;) {
          w = stk.back();
          stk.pop_back();
          on[w] = false;
          comp[w] = comps;
        }
        ++comps;
      }
      const int done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : left[r])
      if (!e.tail && comp[e.to] == comp[r])
        fail_as(ErrorCode::InvalidArgument, "grammar: rule '", g_.rules[r].name,
                "' is left-recursive (it can reach itself through '", g_.rules[e.to].name, "' before matching a byte)");
  g_.root = root;
  return std::move(g_);
}

}  // namespace pocket::constrain
