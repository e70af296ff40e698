#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "util/checked.h"
#include "util/error.h"

namespace pocket {

KVCache::KVCache(const ModelConfig& cfg, int n_ctx)
    : n_kv_heads_(cfg.n_kv_heads), head_dim_(cfg.head_dim), n_ctx_(n_ctx), window_(cfg.sliding_window) {
  if (n_ctx < 1) fail("context size ", n_ctx, " must be at least 1");
  local_slots_ = local_slots_for(cfg, n_ctx);
  const uint64_t row = static_cast<uint64_t>(n_kv_heads_) * 2 * static_cast<uint64_t>(head_dim_);
  uint64_t elems = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const bool local = cfg.is_local(l);
    const int slots = local ? local_slots_ : n_ctx;
    layers_.push_back({static_cast<size_t>(elems), slots, local});
    elems = checked_add(elems, checked_mul(row, static_cast<uint64_t>(slots), "KV cache"), "KV cache");
  }
  bytes_ = checked_mul(elems, sizeof(uint16_t), "KV cache");
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("cannot reserve ", bytes_ >> 20, " MiB for the KV cache of ", n_ctx, " tokens");
  base_ = static_cast<uint16_t*>(p);
}

int KVCache::local_slots_for(const ModelConfig& cfg, int n_ctx) {
  // A local layer needs window - 1 earlier positions, the margin and one write.
  const int window = cfg.sliding_window;
  return window > 0 ? static_cast<int>(std::min<int64_t>(n_ctx, int64_t{window} - 1 + kRollbackMargin + kMaxWrite)) : n_ctx;
}

KVCache::~KVCache() {
  if (base_) munmap(base_, bytes_);
}

void KVCache::reserve_append(int n) {
  if (n < 0 || n > kMaxWrite) fail("KV cache: one write of ", n, " positions (at most ", kMaxWrite, ")");
  if (n_past_ + n > n_ctx_) fail("KV cache: ", n_past_ + n, " positions exceed the context of ", n_ctx_);
  if (window_ <= 0 || n_past_ + n - local_base_ <= local_slots_) return;
  // Keep the positions still visible to the next queries, and the margin.
  const int keep_from = std::max(local_base_, n_past_ - (window_ - 1) - kRollbackMargin);
  const int keep = n_past_ - keep_from;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!layers_[l].local) continue;
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < n_kv_heads_; ++h) {
        uint16_t* dst = base_ + offset(static_cast<int>(l), kv, h, local_base_);
        const uint16_t* src = base_ + offset(static_cast<int>(l), kv, h, keep_from);
        std::memmove(dst, src, static_cast<size_t>(keep) * head_dim_ * sizeof(uint16_t));
      }
  }
  local_base_ = keep_from;
}

void KVCache::set_size(int n) {
  if (n < 0 || n > n_ctx_) fail("KV cache size ", n, " is outside [0, ", n_ctx_, "]");
  if (n - local_base_ > local_slots_) fail("KV cache size ", n, " was not reserved (reserve_append first)");
  n_past_ = n;
}

int KVCache::rollback_limit() const { return local_base_ == 0 ? 0 : local_base_ + window_ - 1; }

void KVCache::truncate(int n) {
  if (n < 0 || n > n_past_) fail("cannot truncate the KV cache of ", n_past_, " tokens to ", n);
  if (n == 0) {
    local_base_ = 0;
  } else if (n < rollback_limit()) {
    fail("cannot truncate the KV cache of ", n_past_, " tokens to ", n, ": its sliding-window layers keep positions from ",
         local_base_, " only (rollback_limit ", rollback_limit(), ")");
  }
  n_past_ = n;
}

void KVCache::restore(int size, int local_base) {
  if (size < 0 || size > n_ctx_) fail("KV cache: restoring ", size, " positions into a context of ", n_ctx_);
  if (window_ <= 0) local_base = 0;
  if (local_base < 0 || local_base > size || size - local_base > local_slots_)
    fail("KV cache: restoring local layers from position ", local_base, " of ", size, " (they hold ", local_slots_,
         " positions)");
  if (local_base > 0 && size - local_base < window_ - 1)
    fail("KV cache: restoring local layers from position ", local_base, " of ", size, " leaves out positions the window of ",
         window_, " still sees");
  local_base_ = local_base;
  n_past_ = size;
}

}  // namespace pocket
