#include "generate/prefix_cache.h"

#include "generate/session.h"

namespace pocket {

PrefixCache::PrefixCache(Session& session, std::span<const int32_t> prefix) : tokens_(prefix.begin(), prefix.end()) {
  session.prefill(prefix);
  state_ = session.snapshot();
}

void PrefixCache::apply(Session& session) const { session.restore(reinterpret_cast<const uint8_t*>(state_.data()), state_.size(), "the shared prefix"); }

}  // namespace pocket
