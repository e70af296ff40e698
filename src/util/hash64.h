// A fast streaming 64-bit hash (not cryptographic): fingerprints of model
// files and checksums of saved session state. The result depends only on
// the bytes fed, not on how they were split across update() calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pocket {

class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0) : h_(seed ^ 0x9E3779B97F4A7C15ull) {}

  void update(const void* data, size_t n) {
    const auto* b = static_cast<const uint8_t*>(data);
    len_ += n;
    if (fill_ > 0) {
      while (n > 0 && fill_ < 8) buf_ |= uint64_t{*b++} << (8 * fill_++), --n;
      if (fill_ < 8) return;
      mix(buf_);
      buf_ = 0;
      fill_ = 0;
    }
    for (; n >= 8; n -= 8, b += 8) {
      uint64_t w;
      std::memcpy(&w, b, 8);
      mix(w);
    }
    while (n > 0) buf_ |= uint64_t{*b++} << (8 * fill_++), --n;
  }
  template <class T>
  void value(const T& v) {
    update(&v, sizeof(T));
  }

  uint64_t digest() const {
    uint64_t h = h_ ^ (buf_ * kMul1) ^ (len_ * kMul2);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
  }

 private:
  static constexpr uint64_t kMul1 = 0x87C37B91114253D5ull, kMul2 = 0x4CF5AD432745937Full;
  void mix(uint64_t w) {
    h_ ^= w * kMul1;
    h_ = ((h_ << 31) | (h_ >> 33)) * kMul2;
  }
  uint64_t h_;
  uint64_t buf_ = 0;
  uint64_t len_ = 0;
  int fill_ = 0;
};

}  // namespace pocket
