// Key/value cache for incremental decoding, stored as fp16 or, with
// --kv q8, as int8 with one float scale per row (one token of one KV head:
// max|x| / 127), or with --kv q4 as 4-bit codes with one float scale per
// row (max|x| / 7; value = scale * (code - 8), two codes per byte in the
// nibble order of kernels::Q4Rows). A scale per row rather than per block
// of tokens keeps each row's bytes a function of that row alone:
// appending, rolling back and the batch invariance of decode, verify and
// prefill need no block bookkeeping, and the scale costs 4 bytes per
// head_dim (3% of a q8 row at 128, 6% of a q4 row).
//
// q4 rows: head_dim / 2 bytes, e.g. 64 + 4 bytes at head_dim 128 against
// 128 + 4 for q8 and 256 for f16. A q4 row holds the keys (values) of a
// head rotated by kv_rotate, an orthonormal Walsh-Hadamard transform: it
// spreads a few large channels over all of them, so one scale per row
// loses far less (on stories260K's real text at context 256, KL to the
// f16 cache drops from 0.95 to 0.50 nats, perplexity 10.7 to 6.8 against
// 4.16). Attention rotates the queries the same way
// (q . k = Hq . Hk) and rotates its output back (H is its own inverse), so
// kernels see ordinary rows. head_dim must be a power of two.
//
// Memory is reserved for the whole context up front as anonymous virtual
// memory; pages become resident only when a position is written, so the
// resident size follows the tokens actually used. Layout per layer:
// [K or V][kv head][slot][head_dim], so the rows one attention head reads
// are contiguous (streamed, prefetched) rather than kv_dim apart.
//
// Sliding-window (local) layers see only their last `sliding_window`
// positions, so they hold only those, plus room for one batch of writes
// and a short rollback margin: when a write would not fit, the rows still
// visible (and the margin) move to the front and older positions are gone.
// Global layers hold every position, in slot = position.
//
// Copy-on-write prefixes: image() writes the cache's positions into a
// memory file (Linux memfd) in the cache's own layout; adopt() maps that
// file over another cache of the same shape (type, context, model) as a
// private mapping, so every cache that adopts one image shares its pages
// until it writes to one (the kernel then copies that page for the writer).
// A long system prompt prefilled once thus costs its rows once, not once per
// session.
//
// truncate() rolls the cache back to a shorter length. Speculative decoding
// uses it to drop rejected draft tokens; chat uses it to reuse a shared
// prefix between turns. Below rollback_limit() the local layers no longer
// have the rows a shorter sequence needs: only truncate(0) works there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"

namespace pocket {

class KVCache;

// A read-only image of a cache's first size() positions (KVCache::image).
class KVImage {
 public:
  ~KVImage();
  KVImage(const KVImage&) = delete;
  KVImage& operator=(const KVImage&) = delete;
  int size() const { return size_; }            // positions it holds
  size_t stored_bytes() const { return stored_; }  // bytes of rows and scales written to the file

 private:
  friend class KVCache;
  KVImage() = default;
  int fd_ = -1;
  int size_ = 0;
  size_t stored_ = 0;
  std::string shape_;  // KVCache::shape() of the cache it was taken from
};

// The element types of the cache (the values are stored in session files).
enum class KVType : uint32_t { F16 = 1, Q8 = 2, Q4 = 3 };
const char* kv_type_name(KVType t);
// "f16" / "q8" / "q4"; anything else is an error naming the choices.
KVType parse_kv_type(const std::string& name);

// x[0, n) <- H x with H the orthonormal Walsh-Hadamard matrix of order n
// (a power of two), for each of `rows` rows of n; H H = I.
void kv_rotate(float* x, int64_t rows, int n);

// Bytes one position costs in one layer's cache (K and V of every KV head).
uint64_t kv_bytes_per_layer_position(const ModelConfig& cfg, KVType type);
// Bytes one position costs over all layers, as if every layer kept every
// position (sliding-window layers stop growing at their window: see
// kv_cache_bytes for the exact reservation of a context).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, KVType type);
// Bytes a KVCache of n_ctx positions reserves (what KVCache(cfg, n_ctx, type)
// maps; pages become resident as positions are written).
uint64_t kv_cache_bytes(const ModelConfig& cfg, int n_ctx, KVType type);

class KVCache {
 public:
  // Positions one forward step may append at most (Model splits longer
  // inputs), and positions kept beyond the window for rollback.
  static constexpr int kMaxWrite = 256;
  static constexpr int kRollbackMargin = 64;

  KVCache(const ModelConfig& cfg, int n_ctx, KVType type = KVType::F16);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  int capacity() const { return n_ctx_; }
  KVType type() const { return type_; }
  int size() const { return n_past_; }
  // Makes room to write positions [size, size + n) (n <= kMaxWrite); call
  // before writing them, then set_size(size + n).
  void reserve_append(int n);
  void set_size(int n);  // after the forward pass has written positions [size, n)
  void truncate(int n);  // n <= size(); n >= rollback_limit() or n == 0
  void clear() { truncate(0); }
  int rollback_limit() const;

  // First position a layer still stores (0 unless local and shifted).
  int first_stored(int layer) const { return layers_[layer].local ? local_base_ : 0; }
  // Row `pos` of KV head `head` (head_dim values); rows of a head follow
  // each other. pos in [first_stored(layer), size + pending writes).
  // kv: 0 keys, 1 values. An f16 cache's rows are IEEE halves; a q8
  // cache's are int8 and a q4 cache's packed 4-bit codes (head_dim / 2
  // bytes), each with its scale (row_scale, contiguous per head as the
  // rows are).
  uint8_t* row(int layer, int kv, int head, int pos) { return data_ + offset(layer, kv, head, pos) * elem_bits_ / 8; }
  const uint8_t* row(int layer, int kv, int head, int pos) const {
    return data_ + offset(layer, kv, head, pos) * elem_bits_ / 8;
  }
  float* row_scale(int layer, int kv, int head, int pos) { return scales_ + offset(layer, kv, head, pos) / head_dim_; }
  const float* row_scale(int layer, int kv, int head, int pos) const {
    return scales_ + offset(layer, kv, head, pos) / head_dim_;
  }
  size_t row_bytes() const { return static_cast<size_t>(head_dim_) * elem_bits_ / 8; }  // without the scale
  // f16 caches only.
  uint16_t* k(int layer, int head, int pos) { return reinterpret_cast<uint16_t*>(row(layer, 0, head, pos)); }
  uint16_t* v(int layer, int head, int pos) { return reinterpret_cast<uint16_t*>(row(layer, 1, head, pos)); }
  const uint16_t* k(int layer, int head, int pos) const { return reinterpret_cast<const uint16_t*>(row(layer, 0, head, pos)); }
  const uint16_t* v(int layer, int head, int pos) const { return reinterpret_cast<const uint16_t*>(row(layer, 1, head, pos)); }
  // Stores one token's keys or values (n_kv_heads * head_dim floats) at `pos`.
  void write(int layer, int kv, int pos, const float* x);
  // Copies n positions of a layer (K and V of every head, with their
  // scales) from src to dst; the ranges may overlap.
  void move_rows(int layer, int dst, int src, int n);
  // Copies n positions of a layer from `src` (a cache of the same type and
  // heads; tree verification's staging rows) into slots dst.. of this one.
  // Global layers only (slot = position).
  void copy_rows_from(const KVCache& src, int layer, int dst, int src_pos, int n);
  size_t reserved_bytes() const { return bytes_; }

  // Shape, for saved session state (state/session_state.h).
  int n_layers() const { return static_cast<int>(layers_.size()); }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  bool is_local(int layer) const { return layers_[layer].local; }
  // Rows a local layer holds at most (positions size - local_slots ... are
  // the oldest a restore can keep).
  int local_slots() const { return local_slots_; }
  // The cache's positions as a shared image (see the header comment); null
  // where memory files are not available or when local layers have shifted
  // (local_base != 0: their slots no longer equal positions).
  std::shared_ptr<const KVImage> image() const;
  // Replaces this cache's contents with `img` (mapped copy-on-write) and
  // sets its size. False, changing nothing, when the shapes differ or the
  // mapping cannot be made; the caller then copies or recomputes the rows.
  bool adopt(const KVImage& img);

  // Sets the size and the first position local layers store, before the
  // caller fills rows [first_stored(l), size) from a saved state. Throws if
  // they do not fit this cache (or leave visible positions missing).
  void restore(int size, int local_base);

 private:
  struct LayerSlots {
    size_t start;  // element offset of the layer
    int slots;     // positions it holds
    bool local;
  };
  static constexpr int kMaxQ4HeadDim = 1024;
  void write_q4(const float* x, uint8_t* y, float* scale) const;  // rotate, then quantize
  std::string shape() const;  // type, context, layer slots, heads: equal shapes share a layout
  size_t offset(int layer, int kv, int head, int pos) const {
    const LayerSlots& L = layers_[layer];
    const int slot = L.local ? pos - local_base_ : pos;
    return L.start + ((static_cast<size_t>(kv) * n_kv_heads_ + head) * L.slots + slot) * head_dim_;
  }
  KVType type_;
  int n_kv_heads_, head_dim_, n_ctx_, window_;
  size_t elem_bits_;  // 16, 8 or 4
  int n_past_ = 0;
  int local_base_ = 0;  // position in slot 0 of every local layer
  int local_slots_ = 0;
  std::vector<LayerSlots> layers_;
  uint8_t* data_ = nullptr;   // the rows, then the scales (q8, q4)
  float* scales_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pocket
