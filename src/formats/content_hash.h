// A content hash of a model: what a decision head (src/heads) names as its
// base, so a head is never applied to features of another model. It covers
// the configuration-relevant bytes (every tensor's name, type, shape and
// data) and the tokenizer's vocabulary; tensors named "head.*" (heads
// stored inside a Pocket file) are left out, so attaching a head does not
// change the hash of the model it belongs to.
#pragma once
#include <string>

#include "formats/model_file.h"

namespace pocket {

class ThreadPool;

// 16 lowercase hex digits. `vocab` is the tokenizer's (the file's own or
// one given beside it). Reads every weight once (tensors hashed in
// parallel on `pool` when given); the result does not depend on the pool.
std::string model_content_hash(const ModelFile& f, const Vocab& vocab, ThreadPool* pool = nullptr);

// The same 64-bit mixing hash over a byte string, for cache keys.
uint64_t hash64(const void* data, size_t n, uint64_t seed = 0);
std::string hex64(uint64_t h);

}  // namespace pocket
