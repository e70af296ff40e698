// GGUF v2/v3 container parsing: typed metadata and tensor infos, every size
// checked against the file before anything is allocated. The model-level
// interpretation (config, tensor names, tokenizer) lives in gguf_model.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "formats/model_file.h"
#include "util/mapped_file.h"

namespace pocket {

// Metadata value types as numbered by the GGUF spec.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// GGUF tensor type ids understood by Pocket (1024+ are Pocket's own).
namespace gguf_tensor_type {
constexpr uint32_t F32 = 0;
constexpr uint32_t F16 = 1;
constexpr uint32_t Q4_0 = 2;
constexpr uint32_t Q4_1 = 3;
constexpr uint32_t Q5_0 = 6;
constexpr uint32_t Q5_1 = 7;
constexpr uint32_t Q8_0 = 8;
constexpr uint32_t Q2_K = 10;
constexpr uint32_t Q3_K = 11;
constexpr uint32_t Q4_K = 12;
constexpr uint32_t Q5_K = 13;
constexpr uint32_t Q6_K = 14;
constexpr uint32_t Q8_K = 15;
constexpr uint32_t BF16 = 30;
constexpr uint32_t PQ4 = 1024;
constexpr uint32_t PQ8 = 1025;
constexpr uint32_t PQ5 = 1026;
}  // namespace gguf_tensor_type

std::optional<DType> dtype_from_gguf(uint32_t type_id);
uint32_t gguf_type_id(DType t);
// "F32, F16, ..." for error messages and `pocket info`.
std::string gguf_supported_types();
std::string_view gguf_type_name(GgufType t);
// Bytes of one fixed-size scalar of type t; 0 for String, Array and unknown types.
uint64_t gguf_scalar_size(GgufType t);


// One metadata value. Strings and scalar arrays point into the mapping.
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // F32 / F64
  std::string_view str;

  // Arrays: element type and count; the payload depends on the element type.
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // fixed-size scalar elements, little-endian
  std::vector<std::string_view> strings;  // String elements
  std::vector<GgufValue> arrays;          // nested Array elements
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type_id = 0;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // slowest first (GGUF's ne reversed)
  uint64_t offset = 0;         // relative to the data section
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  // Parses the container; throws pocket::Error naming the file and the field.
  static GgufFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  int pq_group() const { return pq_group_; }  // pocket.quant.group_size, 0 if absent
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  // Address of a tensor's bytes (bounds were checked by parse()).
  const void* tensor_data(const GgufTensorInfo& t) const { return file_->data() + data_offset_ + t.offset; }
  // A view of the tensor's bytes in the mapping (PQ types get the file's group).
  TensorView view(const GgufTensorInfo& t) const;

  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters: std::nullopt when the key is absent, pocket::Error (naming
  // the file and key) when it has an incompatible type or out-of-range value.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string_view> get_string(const std::string& key) const;

  // Arrays; an absent key gives an empty vector unless `required`.
  std::vector<std::string_view> get_string_array(const std::string& key, bool required) const;
  std::vector<float> get_float_array(const std::string& key, bool required) const;
  std::vector<int64_t> get_int_array(const std::string& key, bool required) const;
  // A u8/i8 array's bytes (e.g. pocket.tokenizer).
  std::pair<const uint8_t*, uint64_t> get_byte_array(const std::string& key) const;

 private:
  const GgufValue& expect_array(const std::string& key, const GgufValue& v) const;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  int pq_group_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

// Opens a GGUF file (or a Pocket file, which is GGUF with `pocket.version`)
// as a ModelFile: config from `<arch>.*` keys, tensors, tokenizer metadata.
ModelFile open_gguf(const std::string& path, const OpenOptions& opts);

}  // namespace pocket
