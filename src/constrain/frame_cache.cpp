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
  return decided.size() * sizeof(uint64_t) + undecided.size() * sizeof(int32_t) + need.size() +
         (over.size() + tagged.size() + escapes.size()) * 2 * sizeof(int32_t);
}

uint64_t FragmentHasher::rule_number(int32_t r) {
  auto [it, fresh] = number_.try_emplace(r, static_cast<int32_t>(number_.size()));
  if (fresh) queue_.push_back(r);
  return static_cast<uint64_t>(it->second);
}

void FragmentHasher::elem(int32_t e) {
  ++spent_;
  if (e >= 0) {
    h_ = mix(h_, kSetTag);
    for (uint64_t w : g_.sets[e].w) h_ = mix(h_, w);
  } else if (g_.is_rep(e)) {
    const Repeat& r = g_.rep(e);
    h_ = mix(mix(mix(mix(h_, kRepTag), rule_number(r.item)), static_cast<uint64_t>(r.min)), static_cast<uint64_t>(r.max));
  } else {
    h_ = mix(mix(h_, kRefTag), rule_number(-(e + 1)));
  }
}

void FragmentHasher::tail(int32_t p) {
  for (; g_.flat[p] != CompiledGrammar::kEnd && ok(); ++p) elem(g_.flat[p]);
  h_ = mix(h_, kEndTag);
}

void FragmentHasher::entry(int32_t pos, int32_t cnt, bool relative) {
  h_ = mix(mix(h_, relative ? kRelTag : kEntryTag), static_cast<uint64_t>(cnt));
  if (relative) {
    h_ = mix(h_, rule_number(g_.rep(g_.flat[pos]).item));
    tail(pos + 1);
  } else {
    tail(pos);
  }
}

Hash128 FragmentHasher::finish(int32_t bottom) {
  h_ = mix(mix(h_, kBottomTag), static_cast<uint64_t>(static_cast<int64_t>(bottom)));
  for (size_t i = 0; i < queue_.size() && ok(); ++i) {
    h_ = mix(h_, kRuleTag);
    for (int32_t s : g_.starts[queue_[i]]) {
      h_ = mix(h_, kAlt);
      tail(s);
    }
  }
  return h_;
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

void FrameCache::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

}  // namespace pocket::constrain
