#include "util/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace pocket {

PageBuffer::PageBuffer(size_t n) : size_(n) {
  if (n == 0) return;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot map ", n, " bytes for a weight copy: ", std::strerror(errno));
  data_ = static_cast<uint8_t*>(p);
  // No MADV_HUGEPAGE: where the kernel's THP defrag is "madvise" (Debian's
  // default) it compacts memory synchronously, and the load of a 253 MB
  // GGUF was measured at 2.2 s instead of 0.4 s.
}

PageBuffer::~PageBuffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

void PageBuffer::populate(size_t offset, size_t length) const {
#ifdef MADV_POPULATE_WRITE
  if (data_ == nullptr || offset >= size_) return;
  length = std::min(length, size_ - offset);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  madvise(data_ + start, length + (offset - start), MADV_POPULATE_WRITE);  // best effort
#else
  (void)offset;
  (void)length;
#endif
}

}  // namespace pocket
