// Pocket's one model hasher: what identifies a model's content. A decision
// head (src/heads) names its base model's full hash, so a head is never
// applied to features of another model; a saved session (src/state) stores
// the sampled hash, so it is never loaded into another model. Both cover
// every tensor's name, type, group and shape and the tokenizer's
// vocabulary; the full hash reads every weight, the sampled one 4 KiB of
// each tensor at its start, middle and end (a fine-tuned or re-quantized
// copy differs there) plus the configuration. Tensors named "head.*"
// (heads stored inside a Pocket file) are left out, so attaching a head
// does not change the hash of the model it belongs to.
#pragma once
#include <cstdint>
#include <string>

#include "formats/model_file.h"
#include "util/hash64.h"

namespace pocket {

class ThreadPool;

enum class HashDepth { Full, Sampled };

// `vocab` is the tokenizer's (the file's own or one given beside it).
// Tensors are hashed in parallel on `pool` when given; the result does not
// depend on the pool.
uint64_t model_hash(const ModelFile& f, const Vocab& vocab, HashDepth depth, ThreadPool* pool = nullptr);

// The full hash as 16 lowercase hex digits (what head files store).
std::string model_content_hash(const ModelFile& f, const Vocab& vocab, ThreadPool* pool = nullptr);

}  // namespace pocket
