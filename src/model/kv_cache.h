// Key/value cache for incremental decoding, stored as fp16.
//
// Memory is reserved for the whole context up front as anonymous virtual
// memory; pages become resident only when a position is written, so the
// resident size follows the tokens actually used. Layout:
// [layer][K or V][kv head][position][head_dim], so the rows one attention
// head reads are contiguous (streamed, prefetched) rather than kv_dim apart.
//
// truncate() rolls the cache back to a shorter length. Speculative decoding
// uses it to drop rejected draft tokens; chat uses it to reuse a shared
// prefix between turns.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/config.h"

namespace pocket {

class KVCache {
 public:
  KVCache(const ModelConfig& cfg, int n_ctx);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  int capacity() const { return n_ctx_; }
  int size() const { return n_past_; }
  void set_size(int n);       // after the forward pass has written positions [size, n)
  void truncate(int n);       // n <= size()
  void clear() { truncate(0); }

  // Row `pos` of KV head `head` (head_dim values); rows of a head follow
  // each other.
  uint16_t* k(int layer, int head, int pos) { return base_ + offset(layer, 0, head, pos); }
  uint16_t* v(int layer, int head, int pos) { return base_ + offset(layer, 1, head, pos); }
  size_t reserved_bytes() const { return bytes_; }

 private:
  size_t offset(int layer, int kv, int head, int pos) const {
    return (((static_cast<size_t>(layer) * 2 + kv) * n_kv_heads_ + head) * n_ctx_ + pos) * head_dim_;
  }
  int n_layers_, n_kv_heads_, head_dim_, n_ctx_;
  int n_past_ = 0;
  uint16_t* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pocket
