// Pocket's one 64-bit hash (fast, not cryptographic): model identity
// (formats/content_hash.h: heads' base hash, saved sessions' model
// fingerprint), saved sessions' checksums and cache keys. Four lanes of
// multiply-rotate over 32-byte blocks (so a long input is not one
// dependency chain), a tail, then the lanes and the length mixed.
// Streaming (Hash64) and one-shot (hash64) give the same value for the
// same bytes, however they are split across update() calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace pocket {

class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0)
      : lane_{seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull, seed ^ 0xA4093822299F31D0ull,
              seed ^ 0x082EFA98EC4E6C89ull} {}

  void update(const void* data, size_t n) {
    if (n == 0) return;  // data may be null then (an empty vector's data()): memcpy must not see it
    const auto* b = static_cast<const uint8_t*>(data);
    len_ += n;
    if (fill_ > 0) {
      const size_t take = n < 32 - fill_ ? n : 32 - fill_;
      std::memcpy(buf_ + fill_, b, take);
      fill_ += take, b += take, n -= take;
      if (fill_ < 32) return;
      block(buf_);
      fill_ = 0;
    }
    for (; n >= 32; n -= 32, b += 32) block(b);
    std::memcpy(buf_, b, n);
    fill_ = n;
  }
  template <class T>
  void value(const T& v) {
    update(&v, sizeof(T));
  }

  uint64_t digest() const {
    uint64_t tail = 0;
    const uint64_t start = len_ - fill_;  // the tail's bytes are numbered by their offset in the input
    for (size_t j = 0; j < fill_; ++j) tail = (tail << 8 | buf_[j]) * 0x100000001B3ull + (start + j);
    uint64_t h = mix(len_ ^ tail);
    for (uint64_t l : lane_) h = mix(h ^ mix(l));
    return h;
  }

 private:
  static constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  static uint64_t mix(uint64_t h) {  // MurmurHash3's 64-bit finalizer
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
  }
  void block(const uint8_t* p) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + 8 * k, 8);
      const uint64_t x = lane_[k] ^ (w * kMul);
      lane_[k] = ((x << 29) | (x >> 35)) * kMul;
    }
  }
  uint64_t lane_[4];
  uint8_t buf_[32] = {};
  size_t fill_ = 0;
  uint64_t len_ = 0;
};

inline uint64_t hash64(const void* data, size_t n, uint64_t seed = 0) {
  Hash64 h(seed);
  h.update(data, n);
  return h.digest();
}

inline std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace pocket
