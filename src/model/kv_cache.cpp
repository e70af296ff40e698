#include "model/kv_cache.h"

#include <sys/mman.h>

#include "util/checked.h"
#include "util/error.h"

namespace pocket {

KVCache::KVCache(const ModelConfig& cfg, int n_ctx)
    : n_layers_(cfg.n_layers), n_kv_heads_(cfg.n_kv_heads), head_dim_(cfg.head_dim), n_ctx_(n_ctx) {
  if (n_ctx < 1) fail("context size ", n_ctx, " must be at least 1");
  uint64_t elems = checked_mul(checked_mul(static_cast<uint64_t>(n_layers_) * 2, static_cast<uint64_t>(n_ctx), "KV cache"),
                               static_cast<uint64_t>(n_kv_heads_) * static_cast<uint64_t>(head_dim_), "KV cache");
  bytes_ = checked_mul(elems, sizeof(uint16_t), "KV cache");
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("cannot reserve ", bytes_ >> 20, " MiB for the KV cache of ", n_ctx, " tokens");
  base_ = static_cast<uint16_t*>(p);
}

KVCache::~KVCache() {
  if (base_) munmap(base_, bytes_);
}

void KVCache::set_size(int n) {
  if (n < 0 || n > n_ctx_) fail("KV cache size ", n, " is outside [0, ", n_ctx_, "]");
  n_past_ = n;
}

void KVCache::truncate(int n) {
  if (n < 0 || n > n_past_) fail("cannot truncate the KV cache of ", n_past_, " tokens to ", n);
  n_past_ = n;
}

}  // namespace pocket
