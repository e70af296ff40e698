#include "prune/vocab_prune.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace pocket::prune {
namespace {

void require_bpe(const Vocab& v) {
  if (v.kind != TokenizerKind::ByteLevelBPE && v.kind != TokenizerKind::SentencePieceBPE)
    fail("vocabulary pruning needs a byte-level or SentencePiece BPE tokenizer");
  if (v.kind == TokenizerKind::SentencePieceBPE && v.scores.size() != v.tokens.size())
    fail("vocabulary pruning: a SentencePiece vocabulary needs one score per token");
}

bool is_sentencepiece(const Vocab& v) { return v.kind == TokenizerKind::SentencePieceBPE; }

// SentencePiece BPE has no merge list: two adjacent symbols merge when their
// concatenated text is a token (normal or user-defined, as the tokenizer's
// text table holds them; the first id wins), the highest score first, ties
// leftmost (bpe.cpp, bpe_sentencepiece). The parents of a normal token are
// the two symbols of the last merge that algorithm applies to the token's own
// text, when it ends in that token; a symbol that is not a token (a single
// character the vocabulary lacks) is -1 and needs nothing kept.
std::vector<std::array<int32_t, 2>> sentencepiece_parents(const Vocab& v) {
  const size_t n = v.tokens.size();
  std::vector<std::string> text(n);
  std::unordered_map<std::string, int32_t> text_ids;
  text_ids.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    if (v.types[i] == TokenType::Normal) text[i] = sentencepiece_text(v.tokens[i]);
    else if (v.types[i] == TokenType::UserDefined) text[i] = v.tokens[i];
    else continue;
    if (!text[i].empty()) text_ids.emplace(text[i], static_cast<int32_t>(i));
  }
  auto find = [&](std::string_view s) {
    auto it = text_ids.find(std::string(s));
    return it == text_ids.end() ? -1 : it->second;
  };
  std::vector<std::array<int32_t, 2>> parents(n, {-1, -1});
  struct Sym {
    size_t start, len;
  };
  std::vector<Sym> syms;
  for (size_t id = 0; id < n; ++id) {
    if (v.types[id] != TokenType::Normal) continue;
    const std::string& t = text[id];
    syms.clear();
    for (size_t i = 0; i < t.size();) {
      size_t len;
      unicode::decode(t, i, len);
      syms.push_back({i, len});
      i += len;
    }
    if (syms.size() < 2) continue;
    std::array<int32_t, 2> last{-1, -1};
    while (syms.size() > 1) {
      size_t best = 0;
      int32_t best_id = -1;
      for (size_t k = 0; k + 1 < syms.size(); ++k) {
        const int32_t m = find(std::string_view(t).substr(syms[k].start, syms[k].len + syms[k + 1].len));
        if (m >= 0 && (best_id < 0 || v.scores[m] > v.scores[best_id])) {
          best = k;
          best_id = m;
        }
      }
      if (best_id < 0) break;
      last = {find(std::string_view(t).substr(syms[best].start, syms[best].len)),
              find(std::string_view(t).substr(syms[best + 1].start, syms[best + 1].len))};
      syms[best].len += syms[best + 1].len;
      syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    if (syms.size() == 1 && find(t) == static_cast<int32_t>(id)) parents[id] = last;
  }
  return parents;
}

// piece -> id over every token (the first id wins, as in the tokenizer).
std::unordered_map<std::string, int32_t> piece_index(const Vocab& v) {
  std::unordered_map<std::string, int32_t> m;
  m.reserve(v.tokens.size() * 2);
  for (size_t i = 0; i < v.tokens.size(); ++i) m.emplace(v.tokens[i], static_cast<int32_t>(i));
  return m;
}

// (left, right, result) ids of every merge; -1 where a piece is missing.
std::vector<std::array<int32_t, 3>> resolve_merges(const Vocab& v,
                                                   const std::unordered_map<std::string, int32_t>& ids) {
  auto find = [&](const std::string& s) {
    auto it = ids.find(s);
    return it == ids.end() ? -1 : it->second;
  };
  std::vector<std::array<int32_t, 3>> out(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto& [a, b] = v.merges[r];
    out[r] = {find(a), find(b), find(a + b)};
  }
  return out;
}

uint64_t pair_key(int32_t l, int32_t r) { return uint64_t(uint32_t(l)) << 32 | uint32_t(r); }

}  // namespace

std::array<int32_t, 256> byte_tokens(const Vocab& v) {
  require_bpe(v);
  std::array<int32_t, 256> out;
  out.fill(-1);
  if (is_sentencepiece(v)) {
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.types[i] != TokenType::Byte) continue;
      const int b = sentencepiece_byte(v.tokens[i]);
      if (b >= 0 && out[b] < 0) out[b] = static_cast<int32_t>(i);
    }
    for (int b = 0; b < 256; ++b)
      if (out[b] < 0) {
        char piece[8];
        std::snprintf(piece, sizeof piece, "<0x%02X>", b);
        fail("SentencePiece vocabulary without byte fallback: no ", piece, " token");
      }
    return out;
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != TokenType::Normal) continue;
    const std::string& t = v.tokens[i];
    size_t len;
    if (t.empty()) continue;
    const int b = byte_level::cp_to_byte(unicode::decode(t, 0, len));
    if (len == t.size() && b >= 0 && out[b] < 0) out[b] = static_cast<int32_t>(i);
  }
  for (int b = 0; b < 256; ++b)
    if (out[b] < 0) fail("not a byte-level BPE vocabulary: no token for byte 0x", std::hex, b);
  return out;
}

std::vector<std::array<int32_t, 2>> bpe_parents(const Vocab& v) {
  require_bpe(v);
  if (is_sentencepiece(v)) {
    byte_tokens(v);  // byte fallback is what makes every string encodable after pruning
    return sentencepiece_parents(v);
  }
  const auto bytes = byte_tokens(v);
  const auto ids = piece_index(v);
  const auto merges = resolve_merges(v, ids);
  struct Merge {
    int32_t rank, result;
  };
  std::unordered_map<uint64_t, Merge> table;
  table.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& m = merges[r];
    if (m[0] >= 0 && m[1] >= 0 && m[2] >= 0) table.emplace(pair_key(m[0], m[1]), Merge{static_cast<int32_t>(r), m[2]});
  }
  std::vector<std::array<int32_t, 2>> parents(v.tokens.size(), {-1, -1});
  std::vector<int32_t> syms;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.types[id] != TokenType::Normal) continue;
    const std::string& piece = v.tokens[id];
    syms.clear();
    for (size_t i = 0; i < piece.size();) {
      size_t len;
      const int b = byte_level::cp_to_byte(unicode::decode(piece, i, len));
      if (b < 0) fail("token ", id, " (\"", piece, "\") has a character outside the byte-level alphabet");
      syms.push_back(bytes[b]);
      i += len;
    }
    if (syms.size() < 2) continue;
    // BPE on the token's own bytes: the lowest rank first, ties leftmost.
    std::array<int32_t, 2> last{-1, -1};
    while (syms.size() > 1) {
      size_t best = 0;
      const Merge* best_merge = nullptr;
      for (size_t k = 0; k + 1 < syms.size(); ++k) {
        auto it = table.find(pair_key(syms[k], syms[k + 1]));
        if (it != table.end() && (!best_merge || it->second.rank < best_merge->rank)) {
          best = k;
          best_merge = &it->second;
        }
      }
      if (!best_merge) break;
      last = {syms[best], syms[best + 1]};
      syms[best] = best_merge->result;
      syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    if (syms.size() == 1 && syms[0] == static_cast<int32_t>(id)) parents[id] = last;
  }
  return parents;
}

Selection select_tokens(const Vocab& v, const std::vector<std::array<int32_t, 2>>& parents,
                        const std::vector<uint64_t>& counts, const SelectOptions& opt) {
  const size_t n = v.tokens.size();
  if (parents.size() != n || counts.size() != n) fail("vocabulary pruning: table sizes do not match the vocabulary");
  Selection s;
  s.kept.assign(n, 0);
  // The tokens of id's closure not yet kept, appended to `out`.
  std::vector<uint32_t> seen(n, 0);
  uint32_t stamp = 0;
  std::vector<int32_t> stack, missing;
  auto closure = [&](int32_t id) {
    ++stamp;
    missing.clear();
    stack.assign(1, id);
    while (!stack.empty()) {
      const int32_t t = stack.back();
      stack.pop_back();
      if (t < 0 || s.kept[t] || seen[t] == stamp) continue;
      seen[t] = stamp;
      missing.push_back(t);
      stack.push_back(parents[t][0]);
      stack.push_back(parents[t][1]);
    }
  };
  auto take = [&] {
    for (int32_t t : missing) s.kept[t] = 1;
    s.total += static_cast<int64_t>(missing.size());
  };

  std::vector<int32_t> mandatory;
  for (int32_t id : byte_tokens(v)) mandatory.push_back(id);
  for (size_t i = 0; i < n; ++i)
    if (v.types[i] != TokenType::Normal && v.types[i] != TokenType::Unused) mandatory.push_back(static_cast<int32_t>(i));
  for (int32_t id : {v.bos_id, v.eos_id, v.pad_id, v.unk_id})
    if (id >= 0) mandatory.push_back(id);
  for (int32_t id : v.eos_ids) mandatory.push_back(id);
  for (int32_t id : opt.must_keep) {
    if (id < 0 || static_cast<size_t>(id) >= n) fail("a token to keep has id ", id, ", outside the vocabulary");
    mandatory.push_back(id);
  }
  for (int32_t id : mandatory) {
    closure(id);
    take();
  }
  s.mandatory = s.total;
  if (opt.keep < s.mandatory)
    fail("--keep ", opt.keep, " is smaller than the mandatory set: ", s.mandatory,
         " tokens (256 byte tokens, every special and added token, the tokens to keep and their BPE ancestors)");

  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i)
    if (v.types[i] == TokenType::Normal && !s.kept[i] && counts[i] >= std::max<uint64_t>(opt.min_count, 1))
      order.push_back(static_cast<int32_t>(i));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
  if (opt.min_count == 0)  // then the unseen ones, in id order (earlier merges first)
    for (size_t i = 0; i < n; ++i)
      if (v.types[i] == TokenType::Normal && !s.kept[i] && counts[i] == 0) order.push_back(static_cast<int32_t>(i));
  for (int32_t id : order) {
    if (s.total >= opt.keep) break;
    if (s.kept[id]) continue;
    closure(id);
    if (s.total + static_cast<int64_t>(missing.size()) <= opt.keep) take();
  }
  s.from_counts = s.total - s.mandatory;
  return s;
}

PrunedVocab apply_selection(const Vocab& v, const std::vector<uint8_t>& kept) {
  require_bpe(v);
  const size_t n = v.tokens.size();
  if (kept.size() != n) fail("vocabulary pruning: selection size does not match the vocabulary");
  PrunedVocab p;
  p.old_to_new.assign(n, -1);
  Vocab& o = p.vocab;
  o.kind = v.kind;
  o.pre = v.pre;
  o.nfc = v.nfc;
  o.add_space_prefix = v.add_space_prefix;
  o.add_bos = v.add_bos;
  o.ignore_merges = v.ignore_merges;
  for (size_t i = 0; i < n; ++i) {
    if (!kept[i]) continue;
    p.old_to_new[i] = static_cast<int32_t>(p.new_to_old.size());
    p.new_to_old.push_back(static_cast<int32_t>(i));
    o.tokens.push_back(v.tokens[i]);
    o.types.push_back(v.types[i]);
    if (!v.scores.empty()) o.scores.push_back(v.scores[i]);
  }
  const auto merges = resolve_merges(v, piece_index(v));
  p.merge_kept.assign(merges.size(), 0);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& m = merges[r];
    if (m[0] < 0 || m[1] < 0 || m[2] < 0 || !kept[m[0]] || !kept[m[1]] || !kept[m[2]]) continue;
    p.merge_kept[r] = 1;
    o.merges.push_back(v.merges[r]);
    o.merge_ids.push_back({p.old_to_new[m[0]], p.old_to_new[m[1]], p.old_to_new[m[2]]});
  }
  auto remap = [&](int32_t id, const char* what) {
    if (id < 0) return -1;
    if (p.old_to_new[id] < 0) fail("vocabulary pruning dropped the ", what, " token ", id);
    return p.old_to_new[id];
  };
  o.bos_id = remap(v.bos_id, "bos");
  o.eos_id = remap(v.eos_id, "eos");
  o.pad_id = remap(v.pad_id, "pad");
  o.unk_id = remap(v.unk_id, "unk");
  for (int32_t id : v.eos_ids) o.eos_ids.push_back(remap(id, "end-of-sequence"));
  return p;
}

std::string id_map_json(const PrunedVocab& p) {
  nlohmann::ordered_json j;
  j["format"] = "pocket-vocab-map";
  j["old_vocab_size"] = p.old_to_new.size();
  j["new_vocab_size"] = p.new_to_old.size();
  j["new_to_old"] = p.new_to_old;
  j["old_to_new"] = p.old_to_new;
  return j.dump() + "\n";
}

}  // namespace pocket::prune
