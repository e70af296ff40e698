#include "constrain/matcher.h"

#include <algorithm>
#include <unordered_map>

#include "util/error.h"

namespace pocket::constrain {

namespace {
constexpr int32_t kUnknown = -2, kDead = -1;
constexpr int32_t kCut = -3;  // parent of a frame state's stack tops: the context below is unknown
constexpr size_t kMaxStates = 1'000'000, kMaxNodes = 4'000'000, kMaxStacks = 4096;
// Sets the bits of the tokens that end at trie node i.
void mark_tokens(const VocabIndex& v, int32_t i, std::vector<uint64_t>& m) {
  for (int32_t k = v.node_tok[i]; k < v.node_tok[i + 1]; ++k) {
    const int32_t id = v.tok_ids[k];
    m[id >> 6] |= uint64_t{1} << (id & 63);
  }
}
uint64_t key(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent + 1);
}
}  // namespace

CompiledGrammar::CompiledGrammar(Grammar g) : sets(std::move(g.sets)), root(g.root) {
  starts.resize(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (auto& alt : g.rules[r].alts) {
      starts[r].push_back(static_cast<int32_t>(flat.size()));
      for (auto& e : alt) flat.push_back(e.is_ref ? -(e.index + 1) : e.index);
      flat.push_back(kEnd);
    }
}

size_t Matcher::KeyHash::operator()(const std::vector<int32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t x : k) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const VocabIndex> vocab)
    : g_(std::move(g)), v_(std::move(vocab)) {
  std::vector<std::pair<int32_t, int32_t>> work;
  for (int32_t s : g_->starts[g_->root]) work.emplace_back(s, -1);
  history_.push_back(close(work));
}

int32_t Matcher::intern_node(int32_t pos, int32_t parent) {
  auto [it, fresh] = node_ids_.try_emplace(key(pos, parent), static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    if (nodes_.size() >= kMaxNodes)
      fail_as(ErrorCode::InvalidArgument, "constraint: the parser state grew past ", kMaxNodes,
              " stack entries (a grammar too ambiguous to follow)");
    nodes_.emplace_back(pos, parent);
  }
  return it->second;
}

// Expands the (position, parent) pairs in `work` until every stack's top is
// a byte set, and interns the resulting state (kDead when nothing is left).
int32_t Matcher::close(std::vector<std::pair<int32_t, int32_t>>& work) {
  seen_.clear();
  scratch_.clear();
  bool accept = false, escaped = false;
  const auto& flat = g_->flat;
  while (!work.empty()) {
    auto [pos, parent] = work.back();
    work.pop_back();
    if (!seen_.insert(key(pos, parent)).second) continue;
    const int32_t e = flat[pos];
    if (e == CompiledGrammar::kEnd) {
      if (parent == kCut)
        escaped = true;
      else if (parent < 0)
        accept = true;
      else
        work.push_back(nodes_[parent]);
    } else if (e >= 0) {
      scratch_.push_back(intern_node(pos, parent));
      if (scratch_.size() > kMaxStacks)
        fail_as(ErrorCode::InvalidArgument, "constraint: more than ", kMaxStacks,
                " parses alive at once (a grammar too ambiguous to follow; make its alternatives distinct)");
    } else {
      const int32_t cont = pos + 1;
      const int32_t np = flat[cont] == CompiledGrammar::kEnd ? parent : intern_node(cont, parent);
      for (int32_t s : g_->starts[-(e + 1)]) work.emplace_back(s, np);
    }
  }
  if (scratch_.empty() && !accept && !escaped) return kDead;
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  const size_t live = scratch_.size();
  if (accept) scratch_.push_back(INT32_MIN);
  if (escaped) scratch_.push_back(INT32_MIN + 1);
  auto [it, fresh] = state_ids_.try_emplace(scratch_, static_cast<int32_t>(states_.size()));
  if (fresh) {
    if (states_.size() >= kMaxStates)
      fail_as(ErrorCode::InvalidArgument, "constraint: more than ", kMaxStates, " parser states (grammar too complex)");
    State st;
    st.accept = accept;
    st.escaped = escaped;
    st.nodes.assign(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(live));
    for (int32_t n : st.nodes) st.bytes |= g_->sets[flat[nodes_[n].first]];
    states_.push_back(std::move(st));
    trans_.resize(trans_.size() + 256, kUnknown);
  }
  return it->second;
}

int32_t Matcher::step(int32_t s, uint8_t b) {
  const int32_t t = trans_[static_cast<size_t>(s) * 256 + b];
  if (t != kUnknown) return t;
  int32_t next = kDead;
  if (states_[s].bytes.test(b)) {
    std::vector<std::pair<int32_t, int32_t>> work;
    for (int32_t n : states_[s].nodes) {
      auto [pos, parent] = nodes_[n];
      if (g_->sets[g_->flat[pos]].test(b)) work.emplace_back(pos + 1, parent);
    }
    next = close(work);
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
  const int32_t from = walk_stack_[v_->node_depth[i] - 1];
  const uint8_t b = v_->node_byte[i];
  const int32_t t = trans_[static_cast<size_t>(from) * 256 + b];
  return t == kUnknown ? step(from, b) : t;
}

void Matcher::make_room(size_t bytes) {
  if (cache_bytes_ == 0 || cache_bytes_ + bytes <= cache_limit_) return;
  masks_.clear();
  frames_.clear();
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
  std::vector<std::pair<int32_t, int32_t>> work;
  // The shared entry: the first of the first stack's entries that lies on
  // every other stack.
  std::unordered_map<int32_t, int32_t> index;  // entry of stack 0 -> its depth
  int32_t d = 0;
  for (int32_t x = tops.empty() ? -1 : tops[0]; x >= 0; x = nodes_[x].second) index.emplace(x, d++);
  int32_t shared = tops.empty() ? d : 0;
  for (size_t i = 1; i < tops.size() && shared < d; ++i) {
    int32_t x = tops[i];
    while (x >= 0 && !index.count(x)) x = nodes_[x].second;
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
    for (int32_t x = n;; x = nodes_[x].second) {
      if (x < 0) {  // the whole stack is kept
        below = -1;
        break;
      }
      chain.push_back(x);
      if (common >= 0 ? x == common : chain.size() == 3) break;
    }
    for (size_t i = chain.size(); i-- > 1;) below = intern_node(nodes_[chain[i]].first, below);
    work.emplace_back(nodes_[chain[0]].first, below);
  }
  std::sort(work.begin(), work.end());
  work.erase(std::unique(work.begin(), work.end()), work.end());
  const int32_t f = work.empty() ? kDead : close(work);
  states_[s].frame = f;
  return f;
}

// One pass over the trie from a frame state: tokens whose every parse stays
// above the cut are decided here; a subtree where some parse returns below
// the cut is recorded (its root) and skipped.
const Matcher::Frame& Matcher::frame_info(int32_t f) {
  ++frame_calls_;
  if (states_[f].frame_info >= 0) {
    ++frame_hits_;
    return frames_[states_[f].frame_info];
  }
  Frame fr;
  fr.decided.assign(v_->mask_words(), 0);
  const auto& byte = v_->node_byte;
  const auto& depth = v_->node_depth;
  const auto& skip = v_->node_skip;
  const int32_t n = static_cast<int32_t>(byte.size());
  walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
  walk_stack_[0] = f;
  for (int32_t i = 0; i < n;) {
    const int32_t t = trie_step(i);
    if (t < 0) {
      i = skip[i];
      continue;
    }
    if (states_[t].escaped) {
      fr.undecided.push_back(i);
      i = skip[i];
      continue;
    }
    walk_stack_[depth[i]] = t;
    mark_tokens(*v_, i, fr.decided);
    ++i;
  }
  undecided_ += static_cast<int64_t>(fr.undecided.size());
  cache_bytes_ += fr.decided.size() * sizeof(uint64_t) + fr.undecided.size() * sizeof(int32_t);
  states_[f].frame_info = static_cast<int32_t>(frames_.size());
  frames_.push_back(std::move(fr));
  return frames_.back();
}

// The frame's decided tokens, plus a walk with the real stacks that visits
// only the undecided subtrees and the trie nodes above them.
void Matcher::compute_mask(int32_t s) {
  make_room(2 * v_->mask_words() * sizeof(uint64_t));
  std::vector<uint64_t> m;
  const int32_t f = frame_of(s);
  if (f >= 0) {
    const Frame& fr = frame_info(f);
    m = fr.decided;
    const auto& roots = fr.undecided;
    const auto& byte = v_->node_byte;
    const auto& depth = v_->node_depth;
    const auto& skip = v_->node_skip;
    const int32_t n = static_cast<int32_t>(byte.size());
    walk_stack_.assign(static_cast<size_t>(v_->max_depth) + 1, 0);
    walk_stack_[0] = s;
    size_t k = 0;
    int32_t inside_end = -1;  // end of the undecided subtree being walked
    for (int32_t i = 0; i < n;) {
      bool inside = i < inside_end;
      if (!inside) {
        while (k < roots.size() && roots[k] < i) ++k;
        if (k == roots.size()) break;
        if (roots[k] >= skip[i]) {  // nothing undecided below node i
          i = skip[i];
          continue;
        }
      }
      const int32_t t = trie_step(i);
      if (t < 0) {
        i = skip[i];
        continue;
      }
      walk_stack_[depth[i]] = t;
      if (!inside && roots[k] == i) {
        inside = true;
        inside_end = skip[i];
      }
      if (inside) mark_tokens(*v_, i, m);
      ++i;
    }
  } else {
    m.assign(v_->mask_words(), 0);
  }
  if (states_[s].accept)
    for (int32_t e : v_->eos_ids) m[e >> 6] |= uint64_t{1} << (e & 63);
  cache_bytes_ += m.size() * sizeof(uint64_t);
  states_[s].mask = static_cast<int32_t>(masks_.size());
  masks_.push_back(std::move(m));
}

std::span<const uint64_t> Matcher::mask() {
  const int32_t s = history_.back();
  ++mask_calls_;
  if (states_[s].mask < 0)
    compute_mask(s);
  else
    ++mask_hits_;
  return masks_[states_[s].mask];
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
          frame_calls_, frame_hits_, evictions_, undecided_};
}

}  // namespace pocket::constrain
