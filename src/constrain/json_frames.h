// The frames every JSON Schema meets, walked once per vocabulary.
//
// A schema's first visit of a frame kind no earlier schema had (a string
// body, an object key, a bounded string's relative count, a number, a
// format's parts) is a walk over the whole vocabulary trie: 1-10 ms at 151K
// tokens, the slowest masks there are. This file owns the list of those
// common kinds and one pass that puts their walks into the vocabulary's
// frame cache (frame_cache.h) by replaying a sample value of each kind,
// byte by byte, in the usual places (a property value, an array item, an
// open object's key), compiled with the default JSON options. Schemas that
// compile the same fragments then find the walks by name; the masks are
// the same either way (a cache hit and a walk give one result).
#pragma once
#include <memory>

#include "constrain/vocab_index.h"

namespace pocket::constrain {

// Walks the common frames into vocab->frame_cache, on the first call for that
// cache only (FrameCache::claim_json_frames; later calls, from any thread,
// return false at once without waiting for the first).
bool warm_json_frames(const std::shared_ptr<const VocabIndex>& vocab);

}  // namespace pocket::constrain
