// The one place the KV cache's size is computed from a model config and a
// KV type (the memory budget's plan, pocket bench): bytes per token of
// context and for a whole cache. The fp16 cache stores K and V rows of kv_dim values per
// layer; a quantized KV type adds its row size here.
#pragma once
#include <cstdint>

#include "core/config.h"

namespace pocket {

// The KV cache element types (the values are saved sessions' type codes).
// KVCache stores F16 today; the quantized types plug in here.
enum class KVType : uint32_t { F16 = 1, Q8 = 2, Q4 = 3 };

// Bytes of K and V one position adds to one layer's cache.
uint64_t kv_row_bytes(const ModelConfig& cfg, KVType kv);
// Bytes one token of context adds to the whole cache (every layer).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, KVType kv);
// The cache for `n_ctx` tokens, as KVCache reserves it: global layers hold
// every position, sliding-window layers only their window and margins.
uint64_t kv_cache_bytes(const ModelConfig& cfg, KVType kv, int n_ctx);

}  // namespace pocket
