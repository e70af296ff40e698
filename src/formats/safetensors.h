// safetensors: u64 header length, JSON header, raw little-endian data.
// The reader checks every declared shape and offset against the file; the
// writer exists for tests and tools.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "util/mapped_file.h"

namespace pocket {

class SafetensorsFile {
 public:
  // Maps and parses `path`; throws pocket::Error naming the file, the tensor
  // and the field on any problem. Supported dtypes: F32, F16, BF16.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }
  // Views into the mapping, by name. Data may be unaligned for its type
  // if the writer packed tensors of different element sizes.
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Largest JSON header the reader accepts.
inline constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

// Writes tensors (type F32/F16/BF16, `data` holding numel elements) in the
// given order, header padded to 8 bytes. Throws pocket::Error.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace pocket
