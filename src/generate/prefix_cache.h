// A shared, read-only prompt prefix (issue 14): a long system prompt is
// prefilled once, its KV cache rows kept in memory, and every new session on
// the same model starts from a copy of them instead of prefilling it again.
//
// The snapshot is the saved-session format (state/session_state.h) held in
// memory, so applying it runs the same checks as loading a file (same model,
// KV type, a context that holds it). Each session gets its own copy of the
// rows (they are copied, not shared copy-on-write: the cache layout keeps a
// head's rows contiguous over the whole context, so pages cannot be shared).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pocket {

class Session;

class PrefixCache {
 public:
  // Prefills `prefix` in `session` (reusing what its cache already holds)
  // and keeps a copy of the resulting state.
  PrefixCache(Session& session, std::span<const int32_t> prefix);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  size_t bytes() const { return state_.size(); }

  // Replaces `session`'s cache with the prefix: it then holds exactly what
  // prefilling the prefix there would have written. Thread-safe (read-only).
  void apply(Session& session) const;

 private:
  std::vector<int32_t> tokens_;
  std::string state_;
};

}  // namespace pocket
