#include "server/constraints.h"

#include "server/api.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket::server {

ConstraintCache::ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer, size_t capacity)
    : tok_(std::move(tokenizer)), capacity_(std::max<size_t>(1, capacity)) {}

std::shared_ptr<const constrain::Constraint> ConstraintCache::get(const constrain::ConstraintSpec& spec,
                                                                  const std::string& param) {
  std::string key = constrain::kind_name(spec.kind);
  key += '\0';
  key += std::to_string(spec.json_max_ws) + (spec.json_open ? "o" : "c");
  key += '\0';
  key += spec.text;
  for (const std::string& c : spec.choices) key += '\0' + c;
  std::shared_ptr<const constrain::VocabIndex> vocab;
  {
    std::lock_guard lk(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
    // Built once, under the lock: concurrent first requests wait for it.
    if (!vocab_) vocab_ = constrain::VocabIndex::build(*tok_);
    vocab = vocab_;
  }
  // Compiled outside the lock, so one slow schema does not hold up the
  // requests whose schemas are cached. Two requests with the same new
  // schema may both compile it; the second one's result is kept.
  std::shared_ptr<const constrain::Constraint> c;
  try {
    c = constrain::compile_constraint(spec, vocab);
  } catch (const Error& e) {
    throw ApiError(400, "'" + param + "': " + e.what(), param, "invalid_schema");
  }
  std::lock_guard lk(mu_);
  ++stats_.compiled;
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.emplace_front(key, c);
  index_[std::move(key)] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return c;
}

ConstraintCache::Stats ConstraintCache::stats() const {
  std::lock_guard lk(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  return s;
}

}  // namespace pocket::server
