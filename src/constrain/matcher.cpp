#include "constrain/matcher.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "util/error.h"

namespace pocket::constrain {

namespace {

// A mask that is `base` (a bitset owned elsewhere, or none = empty) until
// something must change: then `m`, a buffer of the store holding base's
// bits, which set() and the caller's own edits change.
struct CopyOnWriteMask {
  MaskStore& store;
  const uint64_t* base;
  size_t words;
  uint64_t* m = nullptr;
  void own() {
    if (m) return;
    m = store.take();
    if (base)
      std::memcpy(m, base, words * sizeof(uint64_t));
    else
      std::memset(m, 0, words * sizeof(uint64_t));
  }
  void set(int32_t id) {
    if (!m && base && ((base[id >> 6] >> (id & 63)) & 1)) return;
    own();
    m[id >> 6] |= uint64_t{1} << (id & 63);
  }
};
constexpr int32_t kUnknown = -2, kDead = -1;
constexpr int32_t kCut = -3;  // parent of a frame state's stack tops: the context below is unknown
constexpr size_t kMaxStates = 1'000'000, kMaxNodes = 4'000'000, kMaxStacks = 4096;
// Stack entries of counted repetitions in frame states: kRel | j inside the
// repetition with j items more than the real count; kTag | j marks a parse
// that left it after j more items (its return past the repetition is a
// tagged escape).
constexpr int32_t kRel = 1 << 17, kTag = 1 << 18, kCountMask = kRel - 1;
constexpr int32_t kFewItems = FrameMasks::kRoomBitsets;
constexpr int32_t kNone = INT32_MAX;
// Grammar elements per stack of a frame, and reachable from each rule it
// refers to, in the names of the vocabulary's cache (larger fragments are
// not shared).
constexpr size_t kNameBudget = 4096;
// Sets the bits of the tokens that end at trie node i.
void mark_tokens(const VocabIndex& v, int32_t i, std::vector<uint64_t>& m) {
  for (int32_t k = v.node_tok[i]; k < v.node_tok[i + 1]; ++k) {
    const int32_t id = v.tok_ids[k];
    m[id >> 6] |= uint64_t{1} << (id & 63);
  }
}
// pos < 2^22 (the element cap), parent + 3 < 2^23 (the node cap), cnt < 2^19.
// Visits the trie nodes in [from, to) in preorder, each with the state after
// it (stack[depth] holds the state above the first; step(i) is the state
// after node i from its parent's); visit(i, state) false, or a dead state,
// skips the node's subtree.
template <class Step, class Visit>
void walk_trie(const VocabIndex& v, std::vector<int32_t>& stack, int32_t from, int32_t to, Step&& step, Visit&& visit) {
  for (int32_t i = from; i < to;) {
    const int32_t t = step(i);
    if (t < 0 || !visit(i, t)) {
      i = v.node_skip[i];
      continue;
    }
    stack[v.node_depth[i]] = t;
    ++i;
  }
}
// walk_trie over the whole trie from a state whose first bytes are `first`:
// only the subtrees of the root's children with such a byte (the others are
// dead at once; stepping into each of 256 far-apart children costs more
// than the rest of a small walk).
template <class Step, class Visit>
void walk_whole_trie(const VocabIndex& v, const ByteSet& first, std::vector<int32_t>& stack, Step&& step, Visit&& visit) {
  for (int b = 0; b < 256; ++b) {
    const int32_t c = v.root_child[b];
    if (c >= 0 && first.test(static_cast<uint8_t>(b))) walk_trie(v, stack, c, v.node_skip[c], step, visit);
  }
}
uint64_t key(int32_t pos, int32_t parent, int32_t cnt) {
  return static_cast<uint64_t>(pos) | (static_cast<uint64_t>(parent + 3) << 22) | (static_cast<uint64_t>(cnt) << 45);
}
}  // namespace

CompiledGrammar::CompiledGrammar(Grammar g)
    : sets(std::move(g.sets)), reps(std::move(g.reps)), rep_base(-static_cast<int32_t>(g.rules.size()) - 1), root(g.root) {
  starts.resize(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (auto& alt : g.rules[r].alts) {
      starts[r].push_back(static_cast<int32_t>(flat.size()));
      for (auto& e : alt) flat.push_back(e.is_rep ? rep_base - e.index : e.is_ref ? -(e.index + 1) : e.index);
      flat.push_back(kEnd);
    }
  std::map<std::vector<int64_t>, int32_t> first;
  std::vector<int64_t> k;
  for (int32_t p = 0; p < static_cast<int32_t>(flat.size()); ++p) {
    if (!is_rep(flat[p])) continue;
    k.assign(1, rep(flat[p]).item);
    for (int32_t q = p + 1;; ++q) {
      const int32_t e = flat[q];
      if (is_rep(e)) {
        const Repeat& r = rep(e);
        k.insert(k.end(), {int64_t{INT32_MIN} - 1, r.item, r.min, r.max});
      } else {
        k.push_back(e);
      }
      if (e == kEnd) break;
    }
    rep_canon[p] = first.try_emplace(k, p).first->second;
  }
}

size_t Matcher::KeyHash::operator()(const std::vector<int32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : k) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const VocabIndex> vocab)
    : g_(std::move(g)),
      v_(std::move(vocab)),
      store_(v_->mask_pool, v_->mask_words()),
      shared_(v_->frame_cache),
      rule_names_(*g_, kNameBudget) {
  std::vector<Item> work;
  for (int32_t s : g_->starts[g_->root]) work.push_back({s, -1, 0});
  history_.push_back(close(work));
}

int32_t Matcher::intern_node(int32_t pos, int32_t parent, int32_t cnt) {
  auto [it, fresh] = node_ids_.try_emplace(key(pos, parent, cnt), static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    if (nodes_.size() >= kMaxNodes)
      fail_as(ErrorCode::InvalidArgument, "constraint: the parser state grew past ", kMaxNodes,
              " stack entries (a grammar too ambiguous to follow)");
    nodes_.push_back({pos, parent, cnt});
  }
  return it->second;
}

// Expands the (position, parent, count) items in `work` until every stack's
// top is a byte set, and interns the resulting state (kDead when nothing is
// left). At a counted repetition the count is that of the items finished.
int32_t Matcher::close(std::vector<Item>& work) {
  seen_.clear();
  seen_list_.clear();
  scratch_.clear();
  tags_.clear();
  bool accept = false, escaped = false;
  const auto& flat = g_->flat;
  while (!work.empty()) {
    const Item it = work.back();
    work.pop_back();
    if (!first_visit(key(it.pos, it.parent, it.cnt))) continue;
    const int32_t e = flat[it.pos];
    if (e == CompiledGrammar::kEnd) {
      if (it.parent == kCut) {
        escaped = true;
      } else if (it.parent < 0) {
        accept = true;
      } else {
        const Node& up = nodes_[it.parent];
        if (up.cnt & kTag)
          tags_.push_back(up.cnt & kCountMask);
        else
          work.push_back({up.pos, up.parent, up.cnt});
      }
    } else if (e >= 0) {
      scratch_.push_back(intern_node(it.pos, it.parent));
      if (scratch_.size() > kMaxStacks)
        fail_as(ErrorCode::InvalidArgument, "constraint: more than ", kMaxStacks,
                " parses alive at once (a grammar too ambiguous to follow; make its alternatives distinct)");
    } else if (g_->is_rep(e)) {
      const Repeat& rep = g_->rep(e);
      if (it.cnt & kRel) {  // frame states: leave (tagged) or go on, counting relative to the real count
        const int32_t j = it.cnt & kCountMask;
        // No bound here: the frame may stand for repetitions of several
        // bounds; each token needs at most its length in items.
        work.push_back({it.pos + 1, intern_node(it.pos, kCut, kTag | j), 0});
        const int32_t up = intern_node(it.pos, kCut, kRel | (j + 1));
        for (int32_t s : g_->starts[rep.item]) work.push_back({s, up, 0});
      } else {
        const int32_t c = it.cnt;
        if (c >= rep.min) work.push_back({it.pos + 1, it.parent, 0});
        if (rep.max < 0 || c < rep.max) {
          // Unbounded: the count stops at min, where it no longer matters.
          const int32_t up = intern_node(it.pos, it.parent, rep.max < 0 ? std::min(c + 1, rep.min) : c + 1);
          for (int32_t s : g_->starts[rep.item]) work.push_back({s, up, 0});
        }
      }
    } else {
      const int32_t cont = it.pos + 1;
      const int32_t np = flat[cont] == CompiledGrammar::kEnd ? it.parent : intern_node(cont, it.parent);
      for (int32_t s : g_->starts[-(e + 1)]) work.push_back({s, np, 0});
    }
  }
  if (scratch_.empty() && !accept && !escaped && tags_.empty()) return kDead;
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  std::sort(tags_.begin(), tags_.end());
  tags_.erase(std::unique(tags_.begin(), tags_.end()), tags_.end());
  const size_t live = scratch_.size();
  if (accept) scratch_.push_back(INT32_MIN);
  if (escaped) scratch_.push_back(INT32_MIN + 1);
  for (int32_t t : tags_) scratch_.push_back(INT32_MIN + 2 + t);
  auto [it, fresh] = state_ids_.try_emplace(scratch_, static_cast<int32_t>(states_.size()));
  if (fresh) {
    if (states_.size() >= kMaxStates)
      fail_as(ErrorCode::InvalidArgument, "constraint: more than ", kMaxStates, " parser states (grammar too complex)");
    State st;
    st.accept = accept;
    st.escaped = escaped;
    st.esc_tags = tags_;
    st.nodes.assign(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(live));
    for (int32_t n : st.nodes) st.bytes |= g_->sets[flat[nodes_[n].pos]];
    states_.push_back(std::move(st));
    trans_.resize(trans_.size() + 256, kUnknown);
  }
  return it->second;
}

// Most closures visit a handful of items: a list, then a hash set.
bool Matcher::first_visit(uint64_t k) {
  if (seen_list_.size() < 32) {
    if (std::find(seen_list_.begin(), seen_list_.end(), k) != seen_list_.end()) return false;
    seen_list_.push_back(k);
    return true;
  }
  if (seen_.empty()) seen_.insert(seen_list_.begin(), seen_list_.end());
  return seen_.insert(k).second;
}

int32_t Matcher::step(int32_t s, uint8_t b) {
  const int32_t t = trans_[static_cast<size_t>(s) * 256 + b];
  if (t != kUnknown) return t;
  int32_t next = kDead;
  if (states_[s].bytes.test(b)) {
    work_.clear();
    for (int32_t n : states_[s].nodes) {
      const Node& nd = nodes_[n];
      if (g_->sets[g_->flat[nd.pos]].test(b)) work_.push_back({nd.pos + 1, nd.parent, 0});
    }
    next = close(work_);
  }
  trans_[static_cast<size_t>(s) * 256 + b] = next;
  return next;
}

int32_t Matcher::walk(int32_t s, std::string_view bytes) {
  for (char c : bytes) {
    s = step(s, static_cast<uint8_t>(c));
    if (s < 0) return s;
  }
  return s;
}

// The state after trie node i, from the state walk_stack_ holds at its parent.
int32_t Matcher::trie_step(int32_t i) {
  ++trie_steps_;
  const int32_t from = walk_stack_[v_->node_depth[i] - 1];
  const uint8_t b = v_->node_byte[i];
  const int32_t t = trans_[static_cast<size_t>(from) * 256 + b];
  return t == kUnknown ? step(from, b) : t;
}


void Matcher::make_room(size_t bytes) {
  if (cache_bytes_ == 0 || cache_bytes_ + bytes <= cache_limit_) return;
  masks_.clear();
  store_.clear();
  frames_.clear();
  below_escapes_.clear();
  counted_masks_.clear();
  for (State& st : states_) st.mask = st.frame_info = -1;
  cache_bytes_ = 0;
  ++evictions_;
}

// The state cut below the stack entry that all its stacks share nearest
// their tops (e.g. the closing quote of the JSON string they are in), the cut
// marked kCut: everything the state can do before returning past that entry
// is in the frame, the rest is context. So every unbounded JSON string, in
// whatever object, shares one frame. When the stacks share no entry, each is
// cut below its top three (a character class, its repetition, the rule
// around it) or kept whole when no deeper.
int32_t Matcher::frame_of(int32_t s) {
  if (states_[s].frame != kUnknown) return states_[s].frame;
  const auto& tops = states_[s].nodes;
  std::vector<Item> work;
  // The shared entry: the first of the first stack's entries that lies on
  // every other stack.
  std::unordered_map<int32_t, int32_t> index;  // entry of stack 0 -> its depth
  int32_t d = 0;
  for (int32_t x = tops.empty() ? -1 : tops[0]; x >= 0; x = nodes_[x].parent) index.emplace(x, d++);
  int32_t shared = tops.empty() ? d : 0;
  for (size_t i = 1; i < tops.size() && shared < d; ++i) {
    int32_t x = tops[i];
    while (x >= 0 && !index.count(x)) x = nodes_[x].parent;
    shared = std::max(shared, x >= 0 ? index[x] : d);
  }
  int32_t common = -1;
  if (shared < d)
    for (auto [x, depth] : index)
      if (depth == shared) common = x;
  std::vector<int32_t> chain;
  for (int32_t n : tops) {
    chain.clear();
    int32_t below = kCut;
    for (int32_t x = n;; x = nodes_[x].parent) {
      if (x < 0) {  // the whole stack is kept
        below = -1;
        break;
      }
      chain.push_back(x);
      if (common >= 0 ? x == common : chain.size() == 3) break;
    }
    for (size_t i = chain.size(); i-- > 1;) below = intern_node(nodes_[chain[i]].pos, below, nodes_[chain[i]].cnt);
    work.push_back({nodes_[chain[0]].pos, below, 0});
  }
  const int32_t f = work.empty() ? kDead : close(work);
  states_[s].frame = f;
  return f;
}

// One pass over the trie from a frame state: tokens whose every parse stays
// above the cut are decided here; a subtree where some parse returns below
// the cut is recorded (its root) and skipped.
const Matcher::Frame& Matcher::frame_info(int32_t f) {
  Hash128 key;
  bool shareable = false;
  if (const Frame* hit = cached_frame(f, false, key, shareable)) return *hit;
  Frame fr;
  fr.decided.assign(v_->mask_words(), 0);
  walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
  walk_stack_[0] = f;
  const ByteSet first = states_[f].bytes;  // a copy: the walk adds states
  walk_whole_trie(*v_, first, walk_stack_, [&](int32_t i) { return trie_step(i); }, [&](int32_t i, int32_t t) {
    if (states_[t].escaped) {
      fr.undecided.push_back(i);
      return false;
    }
    mark_tokens(*v_, i, fr.decided);
    return true;
  });
  undecided_ += static_cast<int64_t>(fr.undecided.size());
  return keep_frame(f, std::move(fr), key, shareable);
}

// A frame state's name in the vocabulary's cache: its stacks' names, sorted.
bool Matcher::frame_key(int32_t f, bool counted, Hash128& key) {
  std::vector<Hash128> stacks;
  for (int32_t n : states_[f].nodes) {
    FragmentHasher h(*g_, kNameBudget, rule_names_);
    int32_t x = n;
    for (; x >= 0; x = nodes_[x].parent) h.entry(nodes_[x].pos, nodes_[x].cnt, (nodes_[x].cnt & (kRel | kTag)) != 0);
    stacks.push_back(h.finish(x));
    if (!h.ok()) return false;
  }
  std::sort(stacks.begin(), stacks.end(), [](const Hash128& a, const Hash128& b) { return a.a != b.a ? a.a < b.a : a.b < b.b; });
  const State& st = states_[f];
  key = mix(mix(mix({}, counted ? 2u : 1u), st.accept ? 1u : 0u), st.escaped ? 1u : 0u);
  for (int32_t t : st.esc_tags) key = mix(key, static_cast<uint64_t>(t));
  key = mix(key, static_cast<uint64_t>(stacks.size()));
  for (const Hash128& h : stacks) key = mix(key, h);
  return true;
}

// The frame walk of f, from this matcher's cache or the vocabulary's; null
// when it must be done (then `key`/`shareable` say how to share it).
const Matcher::Frame* Matcher::cached_frame(int32_t f, bool counted, Hash128& key, bool& shareable) {
  ++frame_calls_;
  if (states_[f].frame_info >= 0) {
    ++frame_hits_;
    return frames_[states_[f].frame_info].get();
  }
  shareable = shared_ && frame_key(f, counted, key);
  if (!shareable) return nullptr;
  auto hit = shared_->find(key);
  if (!hit) return nullptr;
  ++frame_hits_;
  ++shared_hits_;
  states_[f].frame_info = static_cast<int32_t>(frames_.size());
  frames_.push_back(std::move(hit));
  return frames_.back().get();
}

const Matcher::Frame& Matcher::keep_frame(int32_t f, Frame fr, const Hash128& key, bool shareable) {
  auto p = std::make_shared<const Frame>(std::move(fr));
  cache_bytes_ += p->bytes();
  if (shareable) shared_->insert(key, p);
  states_[f].frame_info = static_cast<int32_t>(frames_.size());
  frames_.push_back(std::move(p));
  return *frames_.back();
}

// The counted repetition nearest the top of any stack of real state s whose
// count still matters (bounded, or below its minimum), and the split of s
// around it. False when there is none.
bool Matcher::counted_split(int32_t s, Split& out) {
  const auto& tops = states_[s].nodes;
  const auto& flat = g_->flat;
  // Each stack's nearest such entry; the one nearest to the most stacks wins
  // (then the one nearest a top). Any choice is exact; this one keeps the
  // other counts out of the frame (a string's stacks, not the stack that
  // already left the string for the array around it), so it is shared by
  // every count of the string.
  struct Vote {
    int32_t node, stacks, depth;
  };
  std::vector<Vote> votes;
  for (int32_t n : tops) {
    int32_t d = 1;
    for (int32_t x = nodes_[n].parent; x >= 0; x = nodes_[x].parent, ++d) {
      const Node& nd = nodes_[x];
      if (!g_->is_rep(flat[nd.pos])) continue;
      const Repeat& rep = g_->rep(flat[nd.pos]);
      if (rep.max >= 0 || nd.cnt < rep.min) {
        auto v = std::find_if(votes.begin(), votes.end(), [&](const Vote& w) { return w.node == x; });
        if (v == votes.end())
          votes.push_back({x, 1, d});
        else
          v->stacks += 1, v->depth = std::min(v->depth, d);
        break;
      }
    }
  }
  if (votes.empty()) return false;
  // An entry below another voted one (an email's list of domain labels
  // under the label's own count) would put the inner count into the frame,
  // one frame walk per count: only the innermost entries compete.
  auto outer = [&](const Vote& v) {
    for (const Vote& w : votes)
      for (int32_t x = w.node == v.node ? -1 : nodes_[w.node].parent; x >= 0; x = nodes_[x].parent)
        if (x == v.node) return true;
    return false;
  };
  const Vote* pick = nullptr;
  for (const Vote& v : votes)
    if (!outer(v) && (!pick || v.stacks > pick->stacks || (v.stacks == pick->stacks && v.depth < pick->depth))) pick = &v;
  out.rep_node = pick->node;
  const Node r = nodes_[out.rep_node];
  std::vector<Item> inside, others;
  std::vector<int32_t> chain;
  for (int32_t n : tops) {
    chain.clear();
    int32_t x = n;
    for (; x >= 0 && x != out.rep_node; x = nodes_[x].parent) chain.push_back(x);
    if (x < 0) {
      others.push_back({nodes_[n].pos, nodes_[n].parent, 0});
      continue;
    }
    int32_t below = intern_node(g_->rep_canon.at(r.pos), kCut, kRel);
    for (size_t i = chain.size(); i-- > 1;) below = intern_node(nodes_[chain[i]].pos, below, nodes_[chain[i]].cnt);
    inside.push_back({nodes_[chain[0]].pos, below, 0});
  }
  out.frame = close(inside);
  int32_t end = r.pos;  // the end of the alternative holding the repetition
  while (flat[end] != CompiledGrammar::kEnd) ++end;
  std::vector<Item> ret{{end, r.parent, 0}};
  out.exit = close(ret);
  out.other = others.empty() ? kDead : close(others);
  return out.frame >= 0 && out.exit >= 0;
}

// For a state of a frame cut below a counted repetition: the room in items
// a token ending here needs to be accepted from inside it or by leaving it
// next to that (State::need), and the relative counts of the other ways out
// (State::apart), each with its own bounds.
void Matcher::rel_info(int32_t t) {
  State& st = states_[t];
  if (st.need != -2) return;
  int32_t jin = kNone;
  std::vector<int32_t> tags = st.esc_tags;
  for (int32_t n : st.nodes) {
    int32_t x = n;
    while (nodes_[x].parent >= 0) x = nodes_[x].parent;
    const int32_t c = nodes_[x].cnt;
    if (c & kRel)
      jin = std::min(jin, c & kCountMask);
    else if (c & kTag)
      tags.push_back(c & kCountMask);
  }
  std::sort(tags.rbegin(), tags.rend());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  // Leaving after j items, next to staying inside with j + 1, widens the
  // room needed to j: the two conditions on the real count join up.
  for (int32_t j : tags) {
    if (jin != kNone && j >= jin - 1)
      jin = std::min(jin, j);
    else
      st.apart.push_back(j);
  }
  st.need = jin == kNone ? -1 : jin;
}

// One pass over the trie from a frame cut below a counted repetition (see
// Frame). Escapes do not end the walk: the parses still inside go on.
const Matcher::Frame& Matcher::counted_frame_info(int32_t f) {
  Hash128 key;
  bool shareable = false;
  if (const Frame* hit = cached_frame(f, true, key, shareable)) return *hit;
  Frame fr;
  const size_t words = v_->mask_words();
  fr.rooms.assign(static_cast<size_t>(kFewItems) * words, 0);  // first: bitset r = the tokens needing exactly r
  fr.decided.assign(words, 0);
  walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
  walk_stack_[0] = f;
  const ByteSet first = states_[f].bytes;  // a copy: the walk adds states
  walk_whole_trie(*v_, first, walk_stack_, [&](int32_t i) { return trie_step(i); }, [&](int32_t i, int32_t t) {
    for (int32_t j : states_[t].esc_tags) fr.escapes.emplace_back(i, j);
    if (v_->node_tok[i] < v_->node_tok[i + 1]) {
      rel_info(t);
      const State& st = states_[t];
      const int32_t need = st.need < 0 ? kNone : st.need;
      const int32_t apart_from = static_cast<int32_t>(fr.tagged.size());
      for (int32_t j : st.apart) fr.tagged.emplace_back(-1, j);
      const int32_t apart_to = static_cast<int32_t>(fr.tagged.size());
      for (int32_t k = v_->node_tok[i]; k < v_->node_tok[i + 1]; ++k) {
        const int32_t id = v_->tok_ids[k];
        if (need != kNone) {
          fr.decided[id >> 6] |= uint64_t{1} << (id & 63);
          if (need < kFewItems)
            fr.rooms[static_cast<size_t>(need) * words + (id >> 6)] |= uint64_t{1} << (id & 63);
          else
            fr.over.emplace_back(need, id);
        }
        for (int32_t a = apart_from; a < apart_to; ++a) {
          if (fr.tagged[a].first < 0)
            fr.tagged[a].first = id;
          else
            fr.tagged.emplace_back(id, fr.tagged[a].second);
        }
      }
    }
    return true;
  });
  for (size_t r = 1; r < static_cast<size_t>(kFewItems); ++r)  // then: at most r
    for (size_t w = 0; w < words; ++w) fr.rooms[r * words + w] |= fr.rooms[(r - 1) * words + w];
  std::sort(fr.escapes.begin(), fr.escapes.end());
  std::sort(fr.over.rbegin(), fr.over.rend());
  return keep_frame(f, std::move(fr), key, shareable);
}

// The tokens accepted below the escapes of counted frame `frame` (not at the
// escape nodes themselves) when the real state past the repetition is
// `exit`, each with the relative count of its escape; cached per pair.
// Only children whose byte `exit` accepts can lead anywhere: when the trie
// has fewer nodes with such bytes than there are escapes (an email's
// local part is left by '.' or '@' only, from most of the trie), those
// nodes are the candidates and each is kept when its parent is an escape;
// otherwise every escape's children are stepped.
const Matcher::Below& Matcher::below_escapes(int32_t frame, const Frame& fr, int32_t exit) {
  const uint64_t k = (static_cast<uint64_t>(frame) << 32) | static_cast<uint32_t>(exit);
  auto it = below_escapes_.find(k);
  if (it != below_escapes_.end()) return it->second;
  Below be;
  auto& out = be.toks;
  walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
  // Walks the subtree of trie node `from` (a child of escape node `node`)
  // from `exit`, pairing each accepted token with the escapes [e, end).
  auto walk_below = [&](int32_t node, int32_t from, int32_t to, size_t e, size_t end) {
    walk_stack_[v_->node_depth[node]] = exit;
    walk_trie(*v_, walk_stack_, from, to, [&](int32_t i) { return trie_step(i); }, [&](int32_t i, int32_t) {
      for (int32_t t = v_->node_tok[i]; t < v_->node_tok[i + 1]; ++t)
        for (size_t x = e; x < end; ++x) out.emplace_back(fr.escapes[x].second, v_->tok_ids[t]);
      return true;
    });
  };
  const ByteSet first = states_[exit].bytes;  // a copy: the walks below add states (states_ may reallocate)
  size_t candidates = 0;
  for (int b = 0; b < 256; ++b)
    if (first.test(static_cast<uint8_t>(b))) candidates += static_cast<size_t>(v_->byte_start[b + 1] - v_->byte_start[b]);
  if (candidates < fr.escapes.size()) {
    for (int b = 0; b < 256; ++b) {
      if (!first.test(static_cast<uint8_t>(b))) continue;
      for (int32_t x = v_->byte_start[b]; x < v_->byte_start[b + 1]; ++x) {
        const int32_t c = v_->byte_nodes[x], p = v_->node_parent[c];
        if (p < 0) continue;
        auto lo = std::lower_bound(fr.escapes.begin(), fr.escapes.end(), std::pair<int32_t, int32_t>(p, INT32_MIN));
        auto hi = lo;
        while (hi != fr.escapes.end() && hi->first == p) ++hi;
        if (lo != hi)
          walk_below(p, c, v_->node_skip[c], static_cast<size_t>(lo - fr.escapes.begin()),
                     static_cast<size_t>(hi - fr.escapes.begin()));
      }
    }
  } else {
    for (size_t e = 0; e < fr.escapes.size();) {
      const int32_t node = fr.escapes[e].first;
      size_t end = e;
      while (end < fr.escapes.size() && fr.escapes[end].first == node) ++end;
      walk_below(node, node + 1, v_->node_skip[node], e, end);
      e = end;
    }
  }
  for (auto [j, id] : out) be.lo = std::min(be.lo, j), be.hi = std::max(be.hi, j);
  for (auto [id, j] : fr.tagged) be.lo = std::min(be.lo, j), be.hi = std::max(be.hi, j);
  if (!fr.over.empty()) be.hi = std::max(be.hi, fr.over[0].first);  // most first
  cache_bytes_ += out.size() * 2 * sizeof(int32_t);
  return below_escapes_.emplace(k, std::move(be)).first->second;
}

size_t Matcher::CountedKeyHash::operator()(const CountedKey& k) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : {k.frame, k.exit, k.other, k.room, k.least, k.accept})
    h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}


// The frame's decided tokens, plus a walk with the real stacks that visits
// only the undecided subtrees and the trie nodes above them. Inside a counted
// repetition: the other stacks' mask, the counted frame's tokens within the
// real bounds, and walks with the real context below its escapes.
void Matcher::compute_mask(int32_t s) {
  Split split;
  if (counted_split(s, split)) {
    const Node& r = nodes_[split.rep_node];
    const Repeat& rep = g_->rep(g_->flat[r.pos]);
    const int32_t room = rep.max < 0 ? kNone : rep.max - r.cnt;  // items the real count still allows
    const int32_t least = rep.min - r.cnt;                       // items it needs before leaving
    make_room(v_->mask_words() * sizeof(uint64_t));
    CountedKey ck;
    {
      // Every j of the frame compares the same with room and least as with
      // these (room above all j, least below all j change nothing).
      const Below& below = below_escapes(split.frame, counted_frame_info(split.frame), split.exit);
      ck = {split.frame, split.exit, split.other,
            room >= kFewItems ? std::min(room, std::max(below.hi, kFewItems)) : room, std::max(least, below.lo),
            states_[s].accept ? 1 : 0};
    }
    if (auto hit = counted_masks_.find(ck); hit != counted_masks_.end()) {
      ++counted_shared_;
      states_[s].mask = hit->second;
      return;
    }
    if (split.other >= 0 && states_[split.other].mask < 0) compute_mask(split.other);
    make_room(v_->mask_words() * sizeof(uint64_t));  // the other's may have filled it
    if (split.other >= 0 && states_[split.other].mask < 0) compute_mask(split.other);  // dropped by that
    const uint64_t* other = split.other >= 0 ? masks_[states_[split.other].mask] : nullptr;
    const Frame& fr = counted_frame_info(split.frame);
    const Below& below = below_escapes(split.frame, fr, split.exit);
    // The frame's tokens within the room: far from the bound all decided
    // ones but the few needing more room than that; near it, the bitset of
    // that room.
    const size_t words = v_->mask_words();
    const uint64_t* base = nullptr;
    bool clears = false;
    if (room >= kFewItems) {
      base = fr.decided.data();
      clears = !fr.over.empty() && fr.over[0].first > room;
    } else if (room >= 0) {
      ++near_bound_;
      base = fr.rooms.data() + static_cast<size_t>(room) * words;
    }
    // The mask is `base` itself unless something is added or cleared.
    CopyOnWriteMask cow{store_, base, words};
    uint64_t*& m = cow.m;
    auto own = [&] { cow.own(); };
    auto set = [&](int32_t id) { cow.set(id); };
    if (clears) {
      own();
      for (auto [j, id] : fr.over) {
        if (j <= room) break;
        m[id >> 6] &= ~(uint64_t{1} << (id & 63));
      }
    }
    if (other) {  // after the clearing: the other stacks' tokens stay
      own();
      for (size_t w = 0; w < words; ++w) m[w] |= other[w];
    }
    for (auto [id, j] : fr.tagged)
      if (j >= least && j <= room) set(id);
    for (auto [j, id] : below.toks)
      if (j >= least && j <= room) set(id);
    if (states_[s].accept)
      for (int32_t e : v_->eos_ids) set(e);
    ++counted_made_;
    if (!m && !base) own();  // nothing at all
    counted_masks_.emplace(ck, keep_mask(s, m ? m : base, m != nullptr));
    return;
  }
  make_room(v_->mask_words() * sizeof(uint64_t));
  const size_t words = v_->mask_words();
  const int32_t f = frame_of(s);
  CopyOnWriteMask cow{store_, nullptr, words};
  const uint64_t*& base = cow.base;
  uint64_t*& m = cow.m;  // made from `base` at the first token it lacks
  auto own = [&] { cow.own(); };
  auto set = [&](int32_t id) { cow.set(id); };
  if (f >= 0) {
    const Frame& fr = frame_info(f);
    base = fr.decided.data();
    // Each undecided subtree: step down its ancestors not yet on the path
    // stepped for the previous one (path_[d]: the node whose state
    // walk_stack_[d] holds), then walk it marking its tokens. Reaching a
    // subtree through its ancestors, not across the siblings before it,
    // keeps a walk of a few hundred nodes from touching all of the trie.
    const auto& depth = v_->node_depth;
    walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
    path_.assign(static_cast<size_t>(v_->max_depth) + 1, -1);
    walk_stack_[0] = s;
    for (int32_t r : fr.undecided) {
      chain_.clear();
      int32_t x = v_->node_parent[r];
      for (; x >= 0 && path_[depth[x]] != x; x = v_->node_parent[x]) chain_.push_back(x);
      if (x >= 0 && walk_stack_[depth[x]] < 0) continue;  // below a dead ancestor
      bool dead = false;
      for (size_t k = chain_.size(); k-- > 0 && !dead;) {
        const int32_t a = chain_[k];
        walk_stack_[depth[a]] = trie_step(a);
        path_[depth[a]] = a;
        dead = walk_stack_[depth[a]] < 0;
      }
      if (dead) continue;
      walk_trie(*v_, walk_stack_, r, v_->node_skip[r], [&](int32_t i) { return trie_step(i); }, [&](int32_t i, int32_t) {
        for (int32_t k = v_->node_tok[i]; k < v_->node_tok[i + 1]; ++k) set(v_->tok_ids[k]);
        return true;
      });
      std::fill(path_.begin() + depth[r], path_.end(), -1);  // the walk wrote walk_stack_ from depth[r] down
    }
  }
  if (states_[s].accept)
    for (int32_t e : v_->eos_ids) set(e);
  if (!base) own();  // no frame: zeros, or only end-of-sequence
  keep_mask(s, m ? m : base, m != nullptr);
}

int32_t Matcher::keep_mask(int32_t s, const uint64_t* bits, bool owned) {
  // A mask read in place costs its entry (the frame it points into is held
  // by frames_, counted there or in the vocabulary's cache).
  cache_bytes_ += owned ? v_->mask_words() * sizeof(uint64_t) : sizeof(bits);
  states_[s].mask = static_cast<int32_t>(masks_.size());
  masks_.push_back(bits);
  return states_[s].mask;
}

std::span<const uint64_t> Matcher::mask() {
  const int32_t s = history_.back();
  ++mask_calls_;
  if (states_[s].mask < 0)
    compute_mask(s);
  else
    ++mask_hits_;
  return {masks_[states_[s].mask], v_->mask_words()};
}

bool Matcher::would_accept(int32_t token) {
  if (token < 0 || token >= v_->vocab_size) return false;
  const int32_t s = history_.back();
  if (std::find(v_->eos_ids.begin(), v_->eos_ids.end(), token) != v_->eos_ids.end()) return states_[s].accept;
  if (v_->excluded[token]) return false;
  return walk(s, v_->bytes[token]) >= 0;
}

bool Matcher::advance(int32_t token) {
  if (!would_accept(token)) return false;
  const int32_t s = history_.back();
  const bool eos = std::find(v_->eos_ids.begin(), v_->eos_ids.end(), token) != v_->eos_ids.end();
  history_.push_back(eos ? s : walk(s, v_->bytes[token]));
  return true;
}

bool Matcher::advance_bytes(std::string_view bytes) {
  const int32_t t = walk(history_.back(), bytes);
  if (t < 0) return false;
  history_.push_back(t);
  return true;
}

void Matcher::rollback(int n) {
  if (n < 0 || n > advances()) fail_as(ErrorCode::InvalidArgument, "constraint: cannot roll back ", n, " of ", advances(), " tokens");
  history_.resize(history_.size() - n);
}

void Matcher::reset() { history_.resize(1); }

bool Matcher::accepting() const { return states_[history_.back()].accept; }
bool Matcher::can_continue() const { return !states_[history_.back()].bytes.empty(); }

Matcher::Stats Matcher::stats() const {
  return {mask_calls_, mask_hits_, static_cast<int64_t>(states_.size()), static_cast<int64_t>(nodes_.size()),
          frame_calls_, frame_hits_, evictions_, undecided_, shared_hits_, trie_steps_,
          counted_made_, counted_shared_, near_bound_};
}

}  // namespace pocket::constrain
