// A shared, read-only prompt prefix (issue 14): a long system prompt is
// prefilled once and every new session on the same model starts from its
// keys and values instead of prefilling it again.
//
// Where the KV cache can make an image (Linux: a memory file,
// model/kv_cache.h), the rows are kept once in that image and a session of
// the same shape (model, KV type, context size) maps it copy-on-write: the
// pages are shared by all such sessions until one writes to a page. A
// session of another shape prefills the prefix itself (the same rows,
// computed again). Without images the prefix is kept as a saved-session
// snapshot in memory (state/session_state.h) and copied into each session,
// with the same checks as loading a file.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pocket {

class Session;
class KVImage;

class PrefixCache {
 public:
  // Prefills `prefix` in `session` (reusing what its cache already holds)
  // and keeps its rows (an image, or a snapshot).
  PrefixCache(Session& session, std::span<const int32_t> prefix);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  size_t bytes() const;  // the rows kept: image or snapshot
  bool copy_on_write() const { return image_ != nullptr; }

  // Replaces `session`'s cache with the prefix: it then holds exactly what
  // prefilling the prefix there would have written. Thread-safe (read-only).
  // Returns true when the session maps the shared image (no copy).
  bool apply(Session& session) const;

 private:
  std::vector<int32_t> tokens_;
  std::shared_ptr<const KVImage> image_;
  std::string state_;  // without an image
};

}  // namespace pocket
