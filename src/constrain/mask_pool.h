// Mask buffers reused across the matchers of one vocabulary.
//
// A matcher keeps every mask it makes (one bit per token: 19 KB at 151K
// tokens) until it is dropped, and each request gets a fresh matcher. Fresh
// buffers are fresh pages: 5-6 page faults per mask, several microseconds
// each on a virtual machine, more than the mask's own work. Buffers given
// back here (by a dropped matcher or a cleared cache) are handed out again
// to the next one, already mapped. Thread-safe; keeps at most `max_free`
// buffers (the rest are freed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pocket::constrain {

class MaskPool {
 public:
  using Buffer = std::unique_ptr<uint64_t[]>;
  MaskPool(size_t words, size_t max_free) : words_(words), max_free_(max_free) {}
  size_t words() const { return words_; }
  // A buffer of words() words, contents unspecified.
  Buffer take();
  void give_back(std::vector<Buffer>& buffers);  // empties `buffers`
  size_t free_buffers();

 private:
  size_t words_, max_free_;
  std::mutex mu_;
  std::vector<Buffer> free_;
};

}  // namespace pocket::constrain

namespace pocket::constrain {

// One matcher's buffers, taken from a pool and given back when cleared or
// dropped (with no pool: plain allocations).
class MaskStore {
 public:
  explicit MaskStore(std::shared_ptr<MaskPool> pool, size_t words) : pool_(std::move(pool)), words_(words) {}
  ~MaskStore() { clear(); }
  MaskStore(MaskStore&&) noexcept = default;
  MaskStore& operator=(MaskStore&& o) noexcept;
  MaskStore(const MaskStore&) = delete;
  MaskStore& operator=(const MaskStore&) = delete;
  // A new buffer of the vocabulary's mask words, kept until clear().
  uint64_t* take();
  void clear();

 private:
  std::shared_ptr<MaskPool> pool_;
  size_t words_;
  std::vector<MaskPool::Buffer> owned_;
};

}  // namespace pocket::constrain
