// The matcher: follows bytes through a grammar and computes token masks.
//
// A parse position is a stack of grammar positions (a pushdown automaton);
// a matcher state is the set of stacks alive after the bytes so far, with
// stacks interned as shared linked nodes so equal states are equal ids. Tail
// calls do not grow the stack, so repetitions (x*) return to the same state.
// Transitions (state, byte) -> state are memoized, which makes the matcher a
// lazily built DFA over the states it meets. Inside a JSON string, a number
// or a regular part of a grammar the state repeats, so most tokens cost a
// cache lookup.
//
// Masks come in two layers, both cached:
// - The frame mask of a state cut below the stack entry all its stacks share
//   nearest their tops (e.g. the end of the JSON string they are in; with
//   none shared, below each stack's top three entries): one pass over the
//   vocabulary trie in preorder,
//   skipping every subtree whose prefix is rejected. A token that stays
//   inside the tops' rules is decided there, for every context those tops
//   occur in; the subtrees where some parse returns below the cut are
//   recorded as undecided. Frame masks depend only on grammar positions, so
//   the same rule (a JSON string, a number) reached under different parents
//   shares one.
// - The mask of a full state: its frame mask plus a walk with the real
//   stacks over the undecided subtrees only (and their ancestors), usually a
//   few hundred trie nodes instead of the whole vocabulary.
// - Counted repetitions (a string of at most 60 characters, x{3,8}) keep
//   their count in a stack entry. A state inside one is split: the stacks
//   through the innermost counted entry get a frame cut right below it with
//   the count made relative (so every count shares one frame walk), and the
//   frame records per token how many more items it uses, which tokens leave
//   the repetition with how many, and the trie nodes where a parse returns
//   past it. The real count then picks the tokens within bounds, and only the
//   subtrees after such returns are walked with the real context. The other
//   stacks are a smaller state whose mask is ORed in.
//   Near the bound (room below 16 items) the frame's bitset for that room
//   is the mask's base, read in place of a per-token need array.
// A mask equal to a frame bitset (nothing added by the real stacks) is that
// bitset, read in place; any other is a buffer from the vocabulary's pool
// (mask_pool.h: already-touched memory, no page faults per mask).
// Cached masks are dropped, all at once, when they would pass the byte cap
// (set_cache_limit); masks are recomputed the same afterwards.
//
// Also the hook for speculative decoding: would_accept() checks a drafted
// token without moving, advance() moves by one token, rollback(n) undoes the
// last n advances.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "constrain/frame_cache.h"
#include "constrain/grammar.h"
#include "constrain/mask_pool.h"
#include "constrain/vocab_index.h"

namespace pocket::constrain {

// A grammar in the flat form the matcher walks.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(Grammar g);
  static constexpr int32_t kEnd = INT32_MIN;
  // Element at a position: >= 0 a byte set, kEnd the end of an alternative,
  // a counted repetition reps[rep_base - e] when e <= rep_base, otherwise a
  // reference to rule -(e + 1).
  std::vector<int32_t> flat;
  std::vector<std::vector<int32_t>> starts;  // per rule, the first position of each alternative
  std::vector<ByteSet> sets;
  std::vector<Repeat> reps;
  int32_t rep_base = -1;
  // Per position of a counted repetition, the first position of one with the
  // same item and the same rest of its alternative: frames cut below either
  // are the same (the bounds are applied from the real count).
  std::unordered_map<int32_t, int32_t> rep_canon;
  int root = 0;
  bool is_rep(int32_t e) const { return e != kEnd && e <= rep_base; }
  const Repeat& rep(int32_t e) const { return reps[static_cast<size_t>(rep_base - e)]; }
};

class Matcher {
 public:
  Matcher(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const VocabIndex> vocab);

  // Bit i set: token i may come next (end-of-sequence ids only where the
  // grammar accepts). Cached per state; the span is valid until the next
  // mask() call.
  std::span<const uint64_t> mask();
  // Cap on the bytes of cached masks (default 256 MiB).
  void set_cache_limit(size_t bytes) { cache_limit_ = bytes; }
  bool would_accept(int32_t token);
  // Moves by one token; false (and no move) when the token is not allowed.
  bool advance(int32_t token);
  // Moves by raw bytes (tests, prefixes); false (and no move) when rejected.
  bool advance_bytes(std::string_view bytes);
  // Undoes the last n advances (n <= advances()).
  void rollback(int n);
  int advances() const { return static_cast<int>(history_.size()) - 1; }
  void reset();

  bool accepting() const;     // the bytes so far are a complete match
  bool can_continue() const;  // some byte may still follow
  bool complete() const { return accepting() && !can_continue(); }

  struct Stats {
    int64_t masks = 0, mask_hits = 0, states = 0, nodes = 0;
    int64_t frame_masks = 0, frame_hits = 0, evictions = 0;
    int64_t undecided = 0;  // undecided subtrees found by frame walks
    int64_t shared_hits = 0;  // frame walks found in the vocabulary's cache
    int64_t trie_steps = 0;   // trie nodes stepped through by all walks
    // Masks of states inside a counted repetition: made, found made for
    // another count, and made near the bound (room below 16 items).
    int64_t counted_made = 0, counted_shared = 0, near_bound = 0;
  };
  Stats stats() const;

 private:
  struct Node {
    int32_t pos, parent;
    int32_t cnt;  // counted repetitions: items so far, or kRel/kTag | relative count (frame states)
  };
  struct Item {
    int32_t pos, parent, cnt;
  };
  struct State {
    std::vector<int32_t> nodes;
    bool accept = false;
    bool escaped = false;  // a parse returned below the cut (frame states only)
    std::vector<int32_t> esc_tags;   // relative counts of parses that returned past a relative repetition
    int32_t need = -2;               // see rel_info (-2 unknown, -1 none)
    std::vector<int32_t> apart;
    ByteSet bytes;
    int32_t mask = -1;   // index into masks_
    int32_t frame = -2;  // the state cut below its stack tops (-2 unknown, -1 none)
    int32_t frame_info = -1;  // index into frames_ (frame states only)
  };
  using Frame = FrameMasks;
  struct Split {  // a state inside a counted repetition
    int32_t rep_node = -1;  // the innermost counted entry on the first stack
    int32_t frame = -1;     // its stacks with the count made relative, cut below it
    int32_t exit = -1;      // the real state after returning past it
    int32_t other = -1;     // the state of the stacks that do not pass through it
  };
  int32_t step(int32_t s, uint8_t b);
  int32_t walk(int32_t s, std::string_view bytes);
  int32_t intern_node(int32_t pos, int32_t parent, int32_t cnt = 0);
  int32_t close(std::vector<Item>& work);
  bool first_visit(uint64_t k);
  void compute_mask(int32_t s);
  bool counted_split(int32_t s, Split& out);
  void rel_info(int32_t t);
  int32_t frame_of(int32_t s);
  const Frame& frame_info(int32_t f);
  const Frame& counted_frame_info(int32_t f);
  bool frame_key(int32_t f, bool counted, Hash128& key);
  const Frame* cached_frame(int32_t f, bool counted, Hash128& key, bool& shareable);
  const Frame& keep_frame(int32_t f, Frame fr, const Hash128& key, bool shareable);
  // The tokens accepted below a counted frame's escapes, and the relative
  // counts the real bounds can tell apart (see below_escapes()).
  struct Below {
    std::vector<std::pair<int32_t, int32_t>> toks;  // (j, token)
    int32_t lo = INT32_MAX, hi = -1;  // least and most j of toks, the frame's tagged and (hi) its needs
  };
  const Below& below_escapes(int32_t frame, const Frame& fr, int32_t exit);
  void make_room(size_t bytes);
  int32_t trie_step(int32_t node);

  std::shared_ptr<const CompiledGrammar> g_;
  std::shared_ptr<const VocabIndex> v_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& k) const;
  };
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> state_ids_;
  std::vector<int32_t> trans_;  // states_ x 256, -2 unknown, -1 dead
  // Per mask, its bits: a buffer of store_ or, when the mask is exactly a
  // bitset of a frame (held in frames_), that bitset, read in place.
  std::vector<const uint64_t*> masks_;
  MaskStore store_;
  int32_t keep_mask(int32_t s, const uint64_t* bits, bool owned);
  std::vector<std::shared_ptr<const Frame>> frames_;
  // Per (counted frame, real state past its repetition): (j, token) for the
  // tokens accepted below the frame's escapes, so each count of one
  // repetition walks them once.
  std::unordered_map<uint64_t, Below> below_escapes_;
  // Masks of states inside a counted repetition by what they are made of:
  // (frame, exit, other state, room, least, accepting) with room and least
  // clamped to the counts that make a difference, so the counts of a long
  // string far from its bounds share one mask.
  struct CountedKey {
    int32_t frame, exit, other, room, least, accept;
    bool operator==(const CountedKey&) const = default;
  };
  struct CountedKeyHash {
    size_t operator()(const CountedKey& k) const;
  };
  std::unordered_map<CountedKey, int32_t, CountedKeyHash> counted_masks_;
  std::shared_ptr<FrameCache> shared_;  // the vocabulary's frames (null: none)
  RuleNames rule_names_;                // names of this grammar's rules in that cache's keys
  size_t cache_bytes_ = 0, cache_limit_ = size_t{256} << 20;
  std::vector<int32_t> walk_stack_, path_, chain_;
  std::vector<int32_t> history_;  // state after each advance; [0] = start
  std::unordered_set<uint64_t> seen_;
  std::vector<int32_t> scratch_, tags_;
  std::vector<uint64_t> seen_list_;
  std::vector<Item> work_;
  int64_t mask_calls_ = 0, mask_hits_ = 0, frame_calls_ = 0, frame_hits_ = 0, evictions_ = 0, undecided_ = 0, shared_hits_ = 0, trie_steps_ = 0;
  int64_t counted_made_ = 0, counted_shared_ = 0, near_bound_ = 0;
};

}  // namespace pocket::constrain
