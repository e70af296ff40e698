// Read-only memory-mapped file. Model weights are used in place from the
// mapping, so loading a model costs page-table entries, not a heap copy.
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

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Whole-file read into a string (for small text files such as JSON configs).
std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace pocket
