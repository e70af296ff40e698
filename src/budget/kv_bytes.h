// The one place the KV cache's size is computed from a model config and a
// KV type (the budget plan, pocket bench): bytes per token of context and
// for a whole cache. The fp16 cache stores K and V rows of kv_dim values per
// layer; a quantized KV type adds its row size here.
#pragma once
#include <cstdint>

#include "core/config.h"

namespace pocket {

enum class KvType { F16 };

// Bytes of K and V one position adds to one layer's cache.
uint64_t kv_row_bytes(const ModelConfig& cfg, KvType kv);
// Bytes one token of context adds to the whole cache (every layer).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, KvType kv);
// The cache for `n_ctx` tokens, as KVCache reserves it: global layers hold
// every position, sliding-window layers only their window and margins.
uint64_t kv_cache_bytes(const ModelConfig& cfg, KvType kv, int n_ctx);

}  // namespace pocket
