#include "model/kv_bytes.h"

#include "model/kv_cache.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

uint64_t kv_row_bytes(const ModelConfig& cfg, KVType kv) {
  switch (kv) {
    case KVType::F16:
      return 2ull * static_cast<uint64_t>(cfg.kv_dim()) * sizeof(uint16_t);
    case KVType::Q8:
    case KVType::Q4:
      break;
  }
  fail("KV cache type ", static_cast<uint32_t>(kv), " is not stored by this build");
  return 0;
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, KVType kv) {
  return kv_row_bytes(cfg, kv) * static_cast<uint64_t>(cfg.n_layers);
}

uint64_t kv_cache_bytes(const ModelConfig& cfg, KVType kv, int n_ctx) {
  const uint64_t local = static_cast<uint64_t>(KVCache::local_slots_for(cfg, n_ctx));
  uint64_t slots = 0;
  for (int l = 0; l < cfg.n_layers; ++l) slots += cfg.is_local(l) ? local : static_cast<uint64_t>(n_ctx);
  return checked_mul(slots, kv_row_bytes(cfg, kv), "KV cache");
}

}  // namespace pocket
