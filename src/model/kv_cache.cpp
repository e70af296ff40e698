#include "model/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__linux__) && defined(SYS_memfd_create)
#define POCKET_KV_IMAGES 1  // memory files (Linux 3.17+, every Android kernel Pocket targets)
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

namespace {

// Bits per element; a q4 cache also needs an even head_dim (two per byte).
size_t elem_bits_of(const ModelConfig& cfg, KVType type) {
  switch (type) {
    case KVType::F16:
      return 16;
    case KVType::Q8:
      return 8;
    case KVType::Q4:
      if (cfg.head_dim < 2 || (cfg.head_dim & (cfg.head_dim - 1)) != 0)
        fail("--kv q4 needs a head_dim that is a power of two (this model's is ", cfg.head_dim, ")");
      return 4;
  }
  fail("KV cache type ", static_cast<uint32_t>(type), " is not supported (f16, q8 or q4)");
}

// Positions a sliding-window layer holds: window - 1 earlier positions, the
// rollback margin and one write.
int local_slots_of(const ModelConfig& cfg, int n_ctx) {
  if (cfg.sliding_window <= 0) return n_ctx;
  return static_cast<int>(
      std::min<int64_t>(n_ctx, int64_t{cfg.sliding_window} - 1 + KVCache::kRollbackMargin + KVCache::kMaxWrite));
}

uint64_t elems_of(const ModelConfig& cfg, int n_ctx) {
  const uint64_t row = static_cast<uint64_t>(cfg.n_kv_heads) * 2 * static_cast<uint64_t>(cfg.head_dim);
  uint64_t elems = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const int slots = cfg.is_local(l) ? local_slots_of(cfg, n_ctx) : n_ctx;
    elems = checked_add(elems, checked_mul(row, static_cast<uint64_t>(slots), "KV cache"), "KV cache");
  }
  return elems;
}

// Bytes of the rows; the scales (q8, q4) start there, 64-byte aligned.
uint64_t data_bytes_of(const ModelConfig& cfg, uint64_t elems, KVType type) {
  const uint64_t data = checked_mul(elems, elem_bits_of(cfg, type), "KV cache") / 8;
  return type == KVType::F16 ? data : checked_add(data, 63, "KV cache") / 64 * 64;
}

// The rows, then (q8, q4) one float per row of head_dim elements.
uint64_t bytes_of(const ModelConfig& cfg, uint64_t elems, KVType type) {
  const uint64_t data = data_bytes_of(cfg, elems, type);
  if (type == KVType::F16) return data;
  return checked_add(data, checked_mul(elems / static_cast<uint64_t>(cfg.head_dim), sizeof(float), "KV cache"),
                     "KV cache");
}

}  // namespace

void kv_rotate(float* x, int64_t rows, int n) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t r = 0; r < rows; ++r, x += n) {
    for (int h = 1; h < n; h *= 2)
      for (int i = 0; i < n; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = x[j], b = x[j + h];
          x[j] = a + b;
          x[j + h] = a - b;
        }
    for (int i = 0; i < n; ++i) x[i] *= norm;
  }
}

const char* kv_type_name(KVType t) {
  switch (t) {
    case KVType::F16:
      return "f16";
    case KVType::Q8:
      return "q8";
    case KVType::Q4:
      return "q4";
  }
  return "?";
}

KVType parse_kv_type(const std::string& name) {
  if (name == "f16") return KVType::F16;
  if (name == "q8") return KVType::Q8;
  if (name == "q4") return KVType::Q4;
  fail_as(ErrorCode::InvalidArgument, "unknown KV cache type '", name, "' (f16, q8 or q4)");
}

uint64_t kv_bytes_per_layer_position(const ModelConfig& cfg, KVType type) {
  const uint64_t row =
      static_cast<uint64_t>(cfg.head_dim) * elem_bits_of(cfg, type) / 8 + (type == KVType::F16 ? 0 : sizeof(float));
  return static_cast<uint64_t>(cfg.n_kv_heads) * 2 * row;
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, KVType type) {
  return checked_mul(kv_bytes_per_layer_position(cfg, type), static_cast<uint64_t>(cfg.n_layers), "KV cache");
}

uint64_t kv_cache_bytes(const ModelConfig& cfg, int n_ctx, KVType type) {
  if (n_ctx < 1) fail("context size ", n_ctx, " must be at least 1");
  return bytes_of(cfg, elems_of(cfg, n_ctx), type);
}

KVCache::KVCache(const ModelConfig& cfg, int n_ctx, KVType type)
    : type_(type),
      n_kv_heads_(cfg.n_kv_heads),
      head_dim_(cfg.head_dim),
      n_ctx_(n_ctx),
      window_(cfg.sliding_window),
      elem_bits_(elem_bits_of(cfg, type)) {
  if (n_ctx < 1) fail("context size ", n_ctx, " must be at least 1");
  if (type == KVType::Q4 && head_dim_ > kMaxQ4HeadDim)
    fail("--kv q4 takes a head_dim of at most ", kMaxQ4HeadDim, " (this model's is ", head_dim_, ")");
  local_slots_ = local_slots_of(cfg, n_ctx);
  const uint64_t row = static_cast<uint64_t>(n_kv_heads_) * 2 * static_cast<uint64_t>(head_dim_);
  uint64_t elems = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const bool local = cfg.is_local(l);
    const int slots = local ? local_slots_ : n_ctx;
    layers_.push_back({static_cast<size_t>(elems), slots, local});
    elems += row * static_cast<uint64_t>(slots);
  }
  bytes_ = kv_cache_bytes(cfg, n_ctx, type);  // checks the sizes above
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("cannot reserve ", bytes_ >> 20, " MiB for the KV cache of ", n_ctx, " tokens");
  data_ = static_cast<uint8_t*>(p);
  if (type_ != KVType::F16) scales_ = reinterpret_cast<float*>(data_ + data_bytes_of(cfg, elems, type_));
}

KVCache::~KVCache() {
  if (data_) munmap(data_, bytes_);
}

KVImage::~KVImage() {
  if (fd_ >= 0) close(fd_);
}

std::string KVCache::shape() const {
  std::string s = cat(static_cast<uint32_t>(type_), "/", n_ctx_, "/", n_kv_heads_, "x", head_dim_, "/", window_, "/", bytes_);
  for (const LayerSlots& L : layers_) s += cat(L.local ? ":l" : ":g", L.slots);
  return s;
}

std::shared_ptr<const KVImage> KVCache::image() const {
#if defined(POCKET_KV_IMAGES)
  if (local_base_ != 0) return nullptr;
  // The system call rather than libc's memfd_create(), which older Android
  // API levels do not declare. 1 = MFD_CLOEXEC.
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "pocket-kv-prefix", 1u));
  if (fd < 0) return nullptr;
  std::shared_ptr<KVImage> img(new KVImage);
  img->fd_ = fd;
  img->size_ = n_past_;
  img->shape_ = shape();
  if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) return nullptr;
  // Only the positions held: the rest of the file stays a hole (no memory).
  auto put = [&](const void* from, size_t n) {
    const auto* p = static_cast<const uint8_t*>(from);
    const off_t at = static_cast<off_t>(p - data_);
    for (size_t done = 0; done < n;) {
      const ssize_t w = pwrite(fd, p + done, n - done, at + static_cast<off_t>(done));
      if (w <= 0) return false;
      done += static_cast<size_t>(w);
    }
    img->stored_ += n;
    return true;
  };
  if (n_past_ == 0) return img;
  for (int l = 0; l < n_layers(); ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < n_kv_heads_; ++h) {
        if (!put(row(l, kv, h, 0), static_cast<size_t>(n_past_) * row_bytes())) return nullptr;
        if (scales_ && !put(row_scale(l, kv, h, 0), static_cast<size_t>(n_past_) * sizeof(float))) return nullptr;
      }
  return img;
#else
  return nullptr;
#endif
}

bool KVCache::adopt(const KVImage& img) {
#if defined(POCKET_KV_IMAGES)
  if (img.fd_ < 0 || img.shape_ != shape()) return false;
  // MAP_FIXED replaces the old pages in one step; it fails only for want of
  // memory, and then the old mapping is put back (empty) before reporting.
  void* p = mmap(data_, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, img.fd_, 0);
  if (p == MAP_FAILED) {
    p = mmap(data_, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("KV cache: cannot map its memory again after a failed shared-prefix mapping");
    n_past_ = local_base_ = 0;
    return false;
  }
  n_past_ = img.size_;
  local_base_ = 0;
  return true;
#else
  (void)img;
  return false;
#endif
}

void KVCache::write(int layer, int kv, int pos, const float* x) {
  for (int h = 0; h < n_kv_heads_; ++h) {
    const float* xh = x + static_cast<size_t>(h) * head_dim_;
    if (type_ == KVType::F16)
      kernels::f32_to_f16_row(xh, reinterpret_cast<uint16_t*>(row(layer, kv, h, pos)), head_dim_);
    else if (type_ == KVType::Q4)
      write_q4(xh, row(layer, kv, h, pos), row_scale(layer, kv, h, pos));
    else
      kernels::quantize_row_q8(xh, reinterpret_cast<int8_t*>(row(layer, kv, h, pos)), row_scale(layer, kv, h, pos),
                               head_dim_);
  }
}

void KVCache::write_q4(const float* x, uint8_t* y, float* scale) const {
  float rotated[kMaxQ4HeadDim];
  std::copy_n(x, head_dim_, rotated);
  kv_rotate(rotated, 1, head_dim_);
  kernels::quantize_row_q4(rotated, y, scale, head_dim_);
}

void KVCache::move_rows(int layer, int dst, int src, int n) {
  if (n <= 0 || dst == src) return;
  for (int kv = 0; kv < 2; ++kv)
    for (int h = 0; h < n_kv_heads_; ++h) {
      std::memmove(row(layer, kv, h, dst), row(layer, kv, h, src), static_cast<size_t>(n) * row_bytes());
      if (scales_)
        std::memmove(row_scale(layer, kv, h, dst), row_scale(layer, kv, h, src), static_cast<size_t>(n) * sizeof(float));
    }
}

void KVCache::copy_rows_from(const KVCache& src, int layer, int dst, int src_pos, int n) {
  if (n <= 0) return;
  if (src.type_ != type_ || src.n_kv_heads_ != n_kv_heads_ || src.head_dim_ != head_dim_ || layers_[layer].local ||
      src.layers_[layer].local || dst < 0 || dst + n > layers_[layer].slots || src_pos < 0 ||
      src_pos + n > src.layers_[layer].slots)
    fail("KV cache: copying ", n, " rows of layer ", layer, " from slot ", src_pos, " to ", dst, " between caches that do not match");
  for (int kv = 0; kv < 2; ++kv)
    for (int h = 0; h < n_kv_heads_; ++h) {
      std::memcpy(row(layer, kv, h, dst), src.row(layer, kv, h, src_pos), static_cast<size_t>(n) * row_bytes());
      if (scales_)
        std::memcpy(row_scale(layer, kv, h, dst), src.row_scale(layer, kv, h, src_pos), static_cast<size_t>(n) * sizeof(float));
    }
}

void KVCache::reserve_append(int n) {
  if (n < 0 || n > kMaxWrite) fail("KV cache: one write of ", n, " positions (at most ", kMaxWrite, ")");
  if (n_past_ + n > n_ctx_) fail("KV cache: ", n_past_ + n, " positions exceed the context of ", n_ctx_);
  if (window_ <= 0 || n_past_ + n - local_base_ <= local_slots_) return;
  // Keep the positions still visible to the next queries, and the margin.
  const int keep_from = std::max(local_base_, n_past_ - (window_ - 1) - kRollbackMargin);
  const int keep = n_past_ - keep_from;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].local) move_rows(static_cast<int>(l), local_base_, keep_from, keep);
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
