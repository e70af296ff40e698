#include "constrain/frame_cache.h"

#include "constrain/matcher.h"

namespace pocket::constrain {

namespace {
uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
constexpr uint64_t kAlt = 0xA17, kEndTag = 0xE4D, kRepTag = 0x4E9, kSetTag = 0x5E7, kRefTag = 0x4EF,
                   kRelTag = 0x4E1, kEntryTag = 0xE47, kBottomTag = 0xB07, kRuleTag = 0x401E;
}  // namespace

Hash128 mix(Hash128 h, uint64_t x) {
  return {splitmix(h.a ^ x), splitmix(h.b + x * 0x5851F42D4C957F2Dull + 0x14057B7EF767814Full)};
}
Hash128 mix(Hash128 h, const Hash128& x) { return mix(mix(h, x.a), x.b); }

size_t FrameMasks::bytes() const {
  return decided.size() * sizeof(uint64_t) + undecided.size() * sizeof(int32_t) + rooms.size() * sizeof(uint64_t) +
         (over.size() + tagged.size() + escapes.size()) * 2 * sizeof(int32_t);
}

namespace {
// One element of an alternative; byte sets as `set(e)` names them, rules
// as `ref(r)` gives them.
template <class Set, class Ref>
Hash128 mix_elem(Hash128 h, const CompiledGrammar& g, int32_t e, Set&& set, Ref&& ref) {
  if (e >= 0) {
    h = mix(h, set(e));
  } else if (g.is_rep(e)) {
    const Repeat& r = g.rep(e);
    h = mix(mix(ref(mix(h, kRepTag), r.item), static_cast<uint64_t>(r.min)), static_cast<uint64_t>(r.max));
  } else {
    h = ref(mix(h, kRefTag), -(e + 1));
  }
  return h;
}
}  // namespace

const Hash128& RuleNames::set_name(int32_t set) {
  if (set_names_.empty()) set_names_.resize(g_->sets.size());
  auto& [h, done] = set_names_[static_cast<size_t>(set)];
  if (!done) {
    h = mix({}, kSetTag);
    for (uint64_t w : g_->sets[static_cast<size_t>(set)].w) h = mix(h, w);
    done = true;
  }
  return h;
}

const Hash128* RuleNames::name(int32_t rule) {
  auto [it, fresh] = names_.try_emplace(rule);
  if (!fresh) return it->second.second ? &it->second.first : nullptr;
  // The rules reachable from `rule`, numbered in the order met.
  std::unordered_map<int32_t, int32_t> number{{rule, 0}};
  std::vector<int32_t> queue{rule};
  auto ref = [&](Hash128 h, int32_t r) {
    auto [n, added] = number.try_emplace(r, static_cast<int32_t>(number.size()));
    if (added) queue.push_back(r);
    return mix(h, static_cast<uint64_t>(n->second));
  };
  Hash128 h{};
  size_t spent = 0;
  for (size_t i = 0; i < queue.size() && spent <= budget_; ++i) {
    h = mix(h, kRuleTag);
    for (int32_t s : g_->starts[queue[i]]) {
      h = mix(h, kAlt);
      for (int32_t p = s; g_->flat[p] != CompiledGrammar::kEnd && spent <= budget_; ++p, ++spent)
        h = mix_elem(h, *g_, g_->flat[p], [&](int32_t e) { return set_name(e); }, ref);
      h = mix(h, kEndTag);
    }
  }
  it->second = {h, spent <= budget_};
  return it->second.second ? &it->second.first : nullptr;
}

void FragmentHasher::rule(int32_t r) {
  const Hash128* n = names_.name(r);
  if (!n) {
    spent_ = budget_ + 1;
    return;
  }
  h_ = mix(h_, *n);
}

void FragmentHasher::tail(int32_t p) {
  auto ref = [&](Hash128 h, int32_t r) {
    h_ = h;
    rule(r);
    return h_;
  };
  auto set = [&](int32_t e) { return names_.set_name(e); };
  for (; g_.flat[p] != CompiledGrammar::kEnd && ok(); ++p, ++spent_) h_ = mix_elem(h_, g_, g_.flat[p], set, ref);
  h_ = mix(h_, kEndTag);
}

void FragmentHasher::entry(int32_t pos, int32_t cnt, bool relative) {
  h_ = mix(mix(h_, relative ? kRelTag : kEntryTag), static_cast<uint64_t>(cnt));
  if (relative) {
    rule(g_.rep(g_.flat[pos]).item);
    tail(pos + 1);
  } else {
    tail(pos);
  }
}

Hash128 FragmentHasher::finish(int32_t bottom) {
  return mix(mix(h_, kBottomTag), static_cast<uint64_t>(static_cast<int64_t>(bottom)));
}

std::shared_ptr<const FrameMasks> FrameCache::find(const Hash128& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void FrameCache::insert(const Hash128& key, std::shared_ptr<const FrameMasks> masks) {
  const size_t b = masks->bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_ + b > limit_) {
    map_.clear();
    bytes_ = 0;
  }
  if (map_.emplace(key, std::move(masks)).second) bytes_ += b;
}

size_t FrameCache::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

std::shared_ptr<FrameCache> FrameCache::copy() {
  auto c = std::make_shared<FrameCache>();
  std::lock_guard<std::mutex> lock(mu_);
  c->map_ = map_;
  c->bytes_ = bytes_;
  c->limit_ = limit_;
  c->json_frames_claimed_.store(json_frames_claimed_.load());
  return c;
}

void FrameCache::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

}  // namespace pocket::constrain
