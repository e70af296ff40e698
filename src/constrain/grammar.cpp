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
  // Few distinct sets exist in practice; a linear search over the last ones
  // keeps the table small without a hash.
  const size_t n = g_.sets.size();
  for (size_t i = n; i > 0 && i + 64 > n; --i)
    if (g_.sets[i - 1] == s) return {false, static_cast<int32_t>(i - 1)};
  g_.sets.push_back(s);
  return {false, static_cast<int32_t>(n)};
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

Seq GrammarBuilder::repeat(const Alts& x, int min, int max, std::string_view hint) {
  if (min < 0 || min > Limits::kMaxRepeat || max > Limits::kMaxRepeat)
    fail_as(ErrorCode::InvalidArgument, "repetition count ", std::max(min, max), " is too large (at most ",
            Limits::kMaxRepeat, ")");
  if (max >= 0 && max < min) fail_as(ErrorCode::InvalidArgument, "repetition {", min, ",", max, "}: max < min");
  Elem item = group(x, hint);
  Seq out(static_cast<size_t>(min), item);
  count(out.size());
  if (max < 0) {  // item* as a right-recursive rule: star ::= item star | ""
    int star = add_rule(cat(hint, "*#", g_.rules.size()));
    define(star, {{item, {true, star}}, {}});
    out.push_back({true, star});
  } else if (max > min) {  // nested optionals: opt_k ::= item opt_{k-1} | ""
    int prev = -1;
    for (int k = 0; k < max - min; ++k) {
      int r = add_rule(cat(hint, "?#", g_.rules.size()));
      Seq first{item};
      if (prev >= 0) first.push_back({true, prev});
      define(r, {std::move(first), {}});
      prev = r;
    }
    out.push_back({true, prev});
  }
  return out;
}

Grammar GrammarBuilder::finish(int root) && {
  const size_t n = g_.rules.size();
  for (size_t r = 0; r < n; ++r)
    if (!defined_[r]) fail_as(ErrorCode::InvalidArgument, "grammar: rule '", g_.rules[r].name, "' is used but never defined");
  // Productive rules (can derive some finite string); drop alternatives that
  // use anything else, so every live parse can always be completed.
  std::vector<bool> prod(n, false);
  auto elem_ok = [&](const Elem& e) { return e.is_ref ? static_cast<bool>(prod[e.index]) : !g_.sets[e.index].empty(); };
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
        if (std::all_of(a.begin(), a.end(), [&](const Elem& e) { return e.is_ref && nullable[e.index]; })) {
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
