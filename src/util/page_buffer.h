// Anonymous memory for the large weight copies made at load (matrices
// repacked into PQ tiles): mapped, not allocated, so untouched pages cost
// nothing, and populated a range at a time in one system call just before
// the range is written (a 178 MB output head is ~45,000 pages: one fault
// each otherwise).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pocket {

// madvise(advice) on the pages holding [offset, offset + length) of a
// mapping of `size` bytes at `base` (page-aligned), clamped to the mapping;
// returns madvise's result (0 when there is nothing to do).
int advise_pages(const uint8_t* base, size_t size, size_t offset, size_t length, int advice);

class PageBuffer {
 public:
  // Throws pocket::Error when `n` bytes cannot be mapped.
  explicit PageBuffer(size_t n);
  ~PageBuffer();
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Maps the pages of [offset, offset + length) now, writable (best effort:
  // a kernel without MADV_POPULATE_WRITE faults them in as they are written).
  void populate(size_t offset, size_t length) const;

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pocket
