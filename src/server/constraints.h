// The response_format constraints of `pocket serve`: a request's JSON Schema
// (or "any JSON") compiled against the model's vocabulary, once per distinct
// schema. Compiled constraints are kept in a small LRU cache keyed by the
// schema text, so clients that send the same schema with every request pay
// the compile once; the vocabulary index is built on the first constrained
// request. Thread-safe: request handlers call get() concurrently.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "constrain/constraint.h"

namespace pocket {
class Tokenizer;
}

namespace pocket::server {

class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const Tokenizer> tokenizer, size_t capacity = 32);

  // The compiled constraint of `spec` (active). A schema the compiler
  // refuses (an unsupported keyword, a bad pattern, ...) is an ApiError 400
  // naming `param` and carrying the compiler's message, which names the
  // keyword and its JSON pointer.
  std::shared_ptr<const constrain::Constraint> get(const constrain::ConstraintSpec& spec, const std::string& param);

  struct Stats {
    uint64_t compiled = 0, hits = 0;
    size_t entries = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<const Tokenizer> tok_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::shared_ptr<const constrain::VocabIndex> vocab_;
  using Entry = std::pair<std::string, std::shared_ptr<const constrain::Constraint>>;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  Stats stats_;
};

}  // namespace pocket::server
