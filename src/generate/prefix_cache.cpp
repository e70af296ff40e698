#include "generate/prefix_cache.h"

#include "generate/session.h"
#include "model/kv_cache.h"
#include "util/error.h"

namespace pocket {

PrefixCache::PrefixCache(Session& session, std::span<const int32_t> prefix) : tokens_(prefix.begin(), prefix.end()) {
  session.prefill(prefix);
  if (session.cached_tokens() != tokens_) fail("shared prefix: the session does not hold the prefix after prefilling it");
  image_ = session.kv_image();
  if (!image_) state_ = session.snapshot();
}

size_t PrefixCache::bytes() const { return image_ ? image_->stored_bytes() : state_.size(); }

bool PrefixCache::apply(Session& session) const {
  if (!image_) {
    session.restore(reinterpret_cast<const uint8_t*>(state_.data()), state_.size(), "the shared prefix");
    return false;
  }
  if (session.adopt(*image_, tokens_)) return true;
  // Another shape (context size, KV type): compute the same rows here.
  if (tokens_.size() > static_cast<size_t>(session.context_size()))
    fail_as(ErrorCode::ContextFull, "the shared prefix has ", tokens_.size(), " tokens but the session's context holds ",
            session.context_size());
  session.reset();
  session.prefill(tokens_);
  return false;
}

}  // namespace pocket
