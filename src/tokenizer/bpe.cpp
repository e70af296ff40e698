// The two BPE merge loops. Both keep the word as a doubly linked list of
// symbols and a min-heap of candidate merges; stale heap entries are skipped
// when popped (lazy deletion), so a word of n bytes costs O(n log n).
#include <algorithm>
#include <cstring>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace pocket {
namespace {

struct Symbol {
  int32_t id;     // byte-level: token id; SentencePiece: unused
  uint32_t start; // byte offset in the word
  uint32_t len;   // bytes
  int32_t prev, next;
};

// A candidate merge of symbol `left` with its right neighbour. `a` and `b`
// identify the pair it was computed for, to detect staleness.
struct Candidate {
  float score;    // lower merges first (byte-level: rank; SentencePiece: -score)
  int32_t left;
  uint32_t a, b;  // byte-level: left/right ids; SentencePiece: left/right lengths
  int32_t merged; // byte-level: the id the pair becomes
  bool operator>(const Candidate& o) const {
    return score != o.score ? score > o.score : left > o.left;  // ties: leftmost first
  }
};

void push(std::vector<Candidate>& heap, Candidate c) {
  heap.push_back(c);
  std::push_heap(heap.begin(), heap.end(), std::greater<>());
}

Candidate pop(std::vector<Candidate>& heap) {
  std::pop_heap(heap.begin(), heap.end(), std::greater<>());
  Candidate c = heap.back();
  heap.pop_back();
  return c;
}

void unlink_right(std::vector<Symbol>& syms, int32_t left) {
  const int32_t right = syms[left].next;
  syms[left].len += syms[right].len;
  syms[left].next = syms[right].next;
  if (syms[right].next >= 0) syms[syms[right].next].prev = left;
  syms[right].len = 0;  // marks it dead
}

}  // namespace

void Tokenizer::Impl::bpe_byte_level(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  const size_t n = word.size();
  if (vocab.ignore_merges) {  // Llama 3: a word that is a token is not merged
    if (int32_t id = text_ids.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (n == 1) {
    out.push_back(byte_ids[p[0]]);
    return;
  }
  if (n > kShortWord) {
    bpe_byte_level_heap(word, out);
    return;
  }
  // Short words (nearly all of them): the symbols stay in one contiguous
  // array and each step scans for the lowest rank. For n <= kShortWord this
  // beats a heap: no stale entries, no pointer chasing, and the scan is a
  // tight loop over a few cache lines.
  BpeScratch::Sym* syms = scratch.syms;
  for (size_t i = 0; i < n; ++i) syms[i] = {byte_ids[p[i]], 0, 0, p[i]};
  // Pairs of two raw bytes (every pair at the start, and most early merges
  // of CJK characters) come from the dense byte-pair table, which stays in
  // cache; the rest from the hash table.
  auto rank_pair = [&](size_t k) {  // the pair (k, k+1)
    const tok_detail::PairMap::Value v =
        (syms[k].byte | syms[k + 1].byte) >= 0 ? byte_pairs[(syms[k].byte << 8) | syms[k + 1].byte]
                                               : merges.find(syms[k].id, syms[k + 1].id);
    syms[k].rank = v.rank >= 0 ? v.rank : kNoMerge;
    syms[k].merged = v.merged;
  };
  for (size_t i = 0; i + 1 < n; ++i) rank_pair(i);
  syms[n - 1].rank = kNoMerge;
  size_t len = n;
  while (len > 1) {
    size_t best = 0;
    int32_t best_rank = syms[0].rank;
    for (size_t k = 1; k + 1 < len; ++k)
      if (syms[k].rank < best_rank) {  // strict: ties go to the leftmost pair
        best = k;
        best_rank = syms[k].rank;
      }
    if (best_rank == kNoMerge) break;
    syms[best].id = syms[best].merged;
    syms[best].byte = -1;
    --len;
    for (size_t k = best + 1; k < len; ++k) syms[k] = syms[k + 1];
    if (best + 1 < len) rank_pair(best);
    else syms[best].rank = kNoMerge;
    if (best > 0) rank_pair(best - 1);
  }
  for (size_t k = 0; k < len; ++k) out.push_back(syms[k].id);
}

void Tokenizer::Impl::bpe_byte_level_heap(std::string_view word, std::vector<int32_t>& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  const size_t n = word.size();
  std::vector<Symbol> syms(n);
  for (size_t i = 0; i < n; ++i)
    syms[i] = {byte_ids[p[i]], static_cast<uint32_t>(i), 1, static_cast<int32_t>(i) - 1,
               i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto consider = [&](int32_t left) {
    if (left < 0 || syms[left].next < 0) return;
    const Symbol& l = syms[left];
    const Symbol& r = syms[l.next];
    const auto v = merges.find(l.id, r.id);
    if (v.rank >= 0)
      push(heap, {static_cast<float>(v.rank), left, static_cast<uint32_t>(l.id), static_cast<uint32_t>(r.id), v.merged});
  };
  for (size_t i = 0; i + 1 < n; ++i) merges.prefetch(syms[i].id, syms[i + 1].id);
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Candidate c = pop(heap);
    Symbol& l = syms[c.left];
    if (l.len == 0 || l.next < 0 || static_cast<uint32_t>(l.id) != c.a ||
        static_cast<uint32_t>(syms[l.next].id) != c.b)
      continue;  // stale
    l.id = c.merged;
    unlink_right(syms, c.left);
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

void Tokenizer::Impl::bpe_sentencepiece(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // Initial symbols: one per UTF-8 character (an invalid byte is its own).
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t len;
    unicode::decode(text, i, len);
    const auto k = static_cast<int32_t>(syms.size());
    syms.push_back({-1, static_cast<uint32_t>(i), static_cast<uint32_t>(len), k - 1, -1});
    if (k > 0) syms[k - 1].next = k;
    i += len;
  }
  std::vector<Candidate> heap;
  heap.reserve(syms.size());
  auto consider = [&](int32_t left) {
    if (left < 0 || syms[left].next < 0) return;
    const Symbol& l = syms[left];
    const Symbol& r = syms[l.next];
    const int32_t id = text_ids.find(text.substr(l.start, l.len + r.len));
    if (id >= 0) push(heap, {-vocab.scores[id], left, l.len, r.len, id});  // highest score first
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) consider(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Candidate c = pop(heap);
    Symbol& l = syms[c.left];
    if (l.len != c.a || l.next < 0 || syms[l.next].len != c.b) continue;  // stale
    unlink_right(syms, c.left);
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].start, syms[i].len);
    if (int32_t id = text_ids.find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback, else one unknown token for the whole symbol.
    bool all_bytes = true;
    for (unsigned char b : piece) all_bytes = all_bytes && byte_ids[b] >= 0;
    if (all_bytes) {
      for (unsigned char b : piece) out.push_back(byte_ids[b]);
    } else {
      out.push_back(vocab.unk_id);
    }
  }
}

}  // namespace pocket
