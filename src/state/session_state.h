// Saved session state (issue 14): what a session holds between runs of the
// program, written to a file and read back so that a conversation continues
// exactly as if it had never stopped.
//
// A state file holds the tokens whose keys/values are cached, the
// conversation's tokens (chat: they may run past the cache by the tokens
// that close the last reply), and the KV cache rows as stored (fp16, or
// int8 / packed 4-bit rows and their float scales: q8 stays q8, q4 stays
// q4), with the model's
// fingerprint, the KV type and the cache shape. Reading checks every size
// against the file and a checksum over the whole file before it touches the
// cache: another model, another KV type, a context too small for the saved
// tokens, a truncated or altered file each give one error naming the problem.
//
// Layout (little-endian): "POCKETSS", u32 version, u32 KV type, u64 model
// fingerprint, u32 n_layers, n_kv_heads, head_dim, sliding_window,
// vocab_size, saved context, size, local_base, n_cached, n_conversation;
// int32 cached tokens, int32 conversation tokens; per layer, K then V, per
// KV head, the rows of positions [first stored, size) (head_dim values
// each), then for q8 the rows' float scales in the same order (K then V, per
// KV head); u64 checksum of everything before it. The KV type (KVType in
// model/kv_cache.h) is the cache's own: a state loads only into a cache of
// the same type.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "formats/model_file.h"
#include "model/kv_cache.h"

namespace pocket {

class Model;

// Identifies a model's content without reading all of it: Pocket's model
// hasher at HashDepth::Sampled (formats/content_hash.h: the config, every
// tensor's name, type and shape, 4 KiB of its bytes at its start, middle
// and end, and the vocabulary).
uint64_t model_fingerprint(const ModelFile& file);

struct SessionState {
  std::vector<int32_t> cached;        // tokens whose keys/values the cache holds, in order
  std::vector<int32_t> conversation;  // chat: the whole conversation (empty for plain generation)
};

// Writes `state` and the cache (which must hold state.cached.size()
// positions) to `path`, atomically (util/atomic_file.h).
void save_session_state(const std::string& path, const Model& model, const KVCache& cache, const SessionState& state);
// The same bytes to a stream (in-memory snapshots: generate/prefix_cache.h).
void write_session_state(std::ostream& out, const Model& model, const KVCache& cache, const SessionState& state);

// Reads a state file into `cache` (its previous contents are replaced) and
// returns the tokens. On any error the cache is left as it was.
SessionState load_session_state(const std::string& path, const Model& model, KVCache& cache);
// The same from bytes in memory; `source` names them in errors.
SessionState read_session_state(const uint8_t* data, size_t size, const std::string& source, const Model& model,
                                KVCache& cache);

}  // namespace pocket
