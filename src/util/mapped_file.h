// Read-only memory-mapped file. Model weights are used in place from the
// mapping, so loading a model costs page-table entries, not a heap copy.
// The file being truncated while mapped is reported as a clear error
// (util/mapping_guard.h), not a bus-error crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace pocket {

class MappedFile {
 public:
  // Throws pocket::Error naming the path if it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Maps every page now, in one system call, instead of one page fault per
  // 4 KiB page during the first forward pass (tens of thousands of faults
  // for a 170 MB model: most of the load-to-first-token time with a warm
  // page cache). Pages the cache does not hold are read from disk here.
  // Best effort: a kernel without MADV_POPULATE_READ (< 5.14) just faults
  // them in later. Throws pocket::Error if the file has become shorter than
  // its mapping (truncated on disk since it was opened).
  void prefault() const { prefault(0, size_); }
  // The same for the bytes [offset, offset + length) (clamped to the file);
  // a loader reporting progress prefaults a large file in slices.
  void prefault(size_t offset, size_t length) const;

  // Drops the whole pages of [p, p + n) that lie in this mapping from the
  // process's resident memory (they are re-read from the page cache if
  // touched again); for weights a model has copied. Best effort; ranges
  // outside the mapping are ignored.
  void release(const void* p, size_t n) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  int guard_slot_ = -1;  // util/mapping_guard.h: a SIGBUS in the mapping is reported by name
};

// Whole-file read into a string (for small text files such as JSON configs).
std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace pocket
