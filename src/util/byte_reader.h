// Bounds-checked little-endian cursor over untrusted bytes. Every read checks
// the remaining length first; errors name the source and the field.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/error.h"

namespace pocket {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string source)
      : data_(data), size_(size), source_(std::move(source)) {}

  size_t offset() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& source() const { return source_; }
  const uint8_t* data() const { return data_; }

  void need(uint64_t n, std::string_view field) const {
    if (n > remaining())
      fail(source_, ": truncated while reading ", field, " at offset ", pos_, " (need ", n,
           " bytes, ", remaining(), " left)");
  }
  void seek(uint64_t off, std::string_view field) {
    if (off > size_) fail(source_, ": ", field, " offset ", off, " is past the end of the file (", size_, " bytes)");
    pos_ = static_cast<size_t>(off);
  }
  void skip(uint64_t n, std::string_view field) {
    need(n, field);
    pos_ += static_cast<size_t>(n);
  }
  const uint8_t* bytes(uint64_t n, std::string_view field) {
    need(n, field);
    const uint8_t* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  template <class T>
  T read(std::string_view field) {
    T v;
    std::memcpy(&v, bytes(sizeof(T), field), sizeof(T));
    return v;
  }
  uint8_t u8(std::string_view f) { return read<uint8_t>(f); }
  uint32_t u32(std::string_view f) { return read<uint32_t>(f); }
  int32_t i32(std::string_view f) { return read<int32_t>(f); }
  uint64_t u64(std::string_view f) { return read<uint64_t>(f); }
  float f32(std::string_view f) { return read<float>(f); }
  std::string_view str(uint64_t n, std::string_view f) {
    return {reinterpret_cast<const char*>(bytes(n, f)), static_cast<size_t>(n)};
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string source_;
};

}  // namespace pocket
