// Frame masks shared across matchers and grammars of one vocabulary.
//
// A frame (see matcher.h) is a parse state cut below some stack entry: its
// trie walk depends only on the grammar fragment above the cut, so every
// JSON string, number or counted string of every schema compiled for a
// vocabulary has the same walk. This file owns the walk's result
// (FrameMasks), the names of grammar fragments independent of rule
// numbering (RuleNames, FragmentHasher), and the per-vocabulary cache from those names
// to results. Names are 128-bit hashes of a full serialization of the
// fragment: two fragments get the same name only when they are structurally
// equal (or on a hash collision, about 2^-128 per pair).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constrain/grammar.h"

namespace pocket::constrain {

// The result of one frame walk over the vocabulary trie.
struct FrameMasks {
  std::vector<uint64_t> decided;   // tokens accepted inside the frame
  std::vector<int32_t> undecided;  // trie nodes (preorder) whose subtrees need the real stacks
  // Frames cut below a counted repetition (relative count j): decided =
  // tokens that can stay inside it; rooms = kRoomBitsets bitsets of
  // mask-word length, bitset r the tokens that stay inside with at most r
  // items of room (the mask near the bound is one of them, read in place);
  // over = (need, token) for tokens needing kRoomBitsets items or more, most
  // first; tagged = (token, j) accepted by leaving the repetition after j
  // more items; escapes = (trie node, j) where a parse returns past it.
  static constexpr int32_t kRoomBitsets = 16;
  std::vector<uint64_t> rooms;
  std::vector<std::pair<int32_t, int32_t>> over, tagged, escapes;
  size_t bytes() const;
};

struct Hash128 {
  uint64_t a = 0, b = 0;
  bool operator==(const Hash128&) const = default;
};
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.a ^ (h.b * 0x9E3779B97F4A7C15ull)); }
};
// Folds x into h (two independent 64-bit lanes).
Hash128 mix(Hash128 h, uint64_t x);
Hash128 mix(Hash128 h, const Hash128& x);

class CompiledGrammar;

// The names of a grammar's rules independent of how it numbers them: a
// rule's name is a hash of everything reachable from it (the rules met
// numbered in the order met from it), so two rules get one name only when
// the grammars below them are the same. Computed once per rule and kept;
// a rule reaching more than `budget` elements has none.
class RuleNames {
 public:
  RuleNames(const CompiledGrammar& g, size_t budget) : g_(&g), budget_(budget) {}
  const Hash128* name(int32_t rule);
  // A byte set's name: a hash of its 256 bits, kept per set.
  const Hash128& set_name(int32_t set);

 private:
  const CompiledGrammar* g_;
  size_t budget_;
  std::unordered_map<int32_t, std::pair<Hash128, bool>> names_;
  std::vector<std::pair<Hash128, bool>> set_names_;
};

// The name of one parse stack of a frame, from its top down to its bottom:
// each entry's count and the rest of its alternative, the rules those
// refer to by their RuleNames. Gives up (ok() false) past `budget`
// elements or at a rule without a name.
class FragmentHasher {
 public:
  FragmentHasher(const CompiledGrammar& g, size_t budget, RuleNames& names) : g_(g), budget_(budget), names_(names) {}
  // An entry at `pos` with count `cnt`; `relative`: a counted repetition
  // whose count is relative (its bounds are not part of the name).
  void entry(int32_t pos, int32_t cnt, bool relative);
  Hash128 finish(int32_t bottom);
  bool ok() const { return spent_ <= budget_; }

 private:
  void tail(int32_t p);
  void rule(int32_t r);
  const CompiledGrammar& g_;
  size_t budget_, spent_ = 0;
  RuleNames& names_;
  Hash128 h_{};
};

// Thread-safe; dropped all at once past its byte cap.
class FrameCache {
 public:
  std::shared_ptr<const FrameMasks> find(const Hash128& key);
  void insert(const Hash128& key, std::shared_ptr<const FrameMasks> masks);
  void set_limit(size_t bytes);
  size_t bytes();  // of the frames held
  // A cache of its own holding the same frames (shared, immutable) and the
  // same limit and JSON-frames claim: later inserts into either one are not
  // seen by the other. E.g. a per-request scratch cache seeded from a warm
  // one, dropped with the request.
  std::shared_ptr<FrameCache> copy();
  // True for the first caller only: that one makes the pass of
  // json_frames.h over this vocabulary (a caller may claim it to skip it).
  bool claim_json_frames() { return !json_frames_claimed_.exchange(true); }

 private:
  std::atomic<bool> json_frames_claimed_{false};
  std::mutex mu_;
  std::unordered_map<Hash128, std::shared_ptr<const FrameMasks>, Hash128Hasher> map_;
  size_t bytes_ = 0, limit_ = size_t{256} << 20;
};

}  // namespace pocket::constrain
