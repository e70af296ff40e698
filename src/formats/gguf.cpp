#include "formats/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/tensor.h"
#include "core/pq_format.h"
#include "util/byte_reader.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

namespace {

constexpr int kMaxArrayDepth = 8;              // nested arrays deeper than this are hostile
constexpr uint64_t kMaxNestedArrays = 1 << 16;  // elements of one array-of-arrays
constexpr uint64_t kMaxKeyLen = 65535;          // GGUF spec limit for keys
constexpr uint64_t kMaxNameLen = 65535;
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxDim = uint64_t{1} << 40;


bool is_known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Decodes a scalar at `p` into the matching GgufValue fields.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue& v) {
  v.type = t;
  switch (t) {
    case GgufType::U8: v.u = load<uint8_t>(p); break;
    case GgufType::I8: v.i = load<int8_t>(p); break;
    case GgufType::U16: v.u = load<uint16_t>(p); break;
    case GgufType::I16: v.i = load<int16_t>(p); break;
    case GgufType::U32: v.u = load<uint32_t>(p); break;
    case GgufType::I32: v.i = load<int32_t>(p); break;
    case GgufType::U64: v.u = load<uint64_t>(p); break;
    case GgufType::I64: v.i = load<int64_t>(p); break;
    case GgufType::F32: v.f = load<float>(p); break;
    case GgufType::F64: v.f = load<double>(p); break;
    case GgufType::Bool: v.u = load<uint8_t>(p) != 0; break;
    case GgufType::String:
    case GgufType::Array: break;
  }
}

bool is_unsigned(GgufType t) { return t == GgufType::U8 || t == GgufType::U16 || t == GgufType::U32 || t == GgufType::U64; }
bool is_signed(GgufType t) { return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64; }

std::string_view read_string(ByteReader& r, const std::string& field) {
  uint64_t n = r.u64(field + " length");
  return r.str(n, field);  // checks n against the remaining bytes before use
}

GgufValue read_value(ByteReader& r, GgufType type, const std::string& key, int depth);

void read_array(ByteReader& r, GgufValue& v, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) fail(r.source(), ": metadata '", key, "': arrays nested deeper than ", kMaxArrayDepth);
  uint32_t et = r.u32("array element type of '" + key + "'");
  if (!is_known_type(et)) fail(r.source(), ": metadata '", key, "': unknown array element type ", et);
  v.elem_type = static_cast<GgufType>(et);
  v.count = r.u64("array length of '" + key + "'");
  if (uint64_t es = gguf_scalar_size(v.elem_type); es != 0) {
    uint64_t bytes = checked_mul(v.count, es, r.source() + ": metadata '" + key + "' array");
    v.raw = r.bytes(bytes, "array '" + key + "'");
  } else if (v.elem_type == GgufType::String) {
    // Each string needs at least its 8-byte length: bound the count first.
    if (v.count > r.remaining() / 8)
      fail(r.source(), ": metadata '", key, "' declares ", v.count, " strings but only ", r.remaining(), " bytes remain");
    v.strings.reserve(static_cast<size_t>(v.count));
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(read_string(r, "string in array '" + key + "'"));
  } else {
    // Each nested array needs at least a 4-byte type and an 8-byte count.
    if (v.count > r.remaining() / 12 || v.count > kMaxNestedArrays)
      fail(r.source(), ": metadata '", key, "' declares ", v.count, " nested arrays, more than the file can hold");
    v.arrays.reserve(static_cast<size_t>(v.count));
    for (uint64_t i = 0; i < v.count; ++i) v.arrays.push_back(read_value(r, GgufType::Array, key, depth + 1));
  }
}

GgufValue read_value(ByteReader& r, GgufType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::String) {
    v.str = read_string(r, "string value of '" + key + "'");
  } else if (type == GgufType::Array) {
    read_array(r, v, key, depth);
  } else {
    decode_scalar(type, r.bytes(gguf_scalar_size(type), "value of '" + key + "'"), v);
  }
  return v;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

namespace {
// Every tensor type Pocket reads from GGUF, with its GGUF id.
struct TypeId {
  DType type;
  uint32_t id;
};
constexpr TypeId kTypeIds[] = {
    {DType::F32, gguf_tensor_type::F32},   {DType::F16, gguf_tensor_type::F16},   {DType::BF16, gguf_tensor_type::BF16},
    {DType::Q8_0, gguf_tensor_type::Q8_0}, {DType::Q4_0, gguf_tensor_type::Q4_0}, {DType::Q4_1, gguf_tensor_type::Q4_1},
    {DType::Q5_0, gguf_tensor_type::Q5_0}, {DType::Q5_1, gguf_tensor_type::Q5_1}, {DType::Q2_K, gguf_tensor_type::Q2_K},
    {DType::Q3_K, gguf_tensor_type::Q3_K}, {DType::Q4_K, gguf_tensor_type::Q4_K}, {DType::Q5_K, gguf_tensor_type::Q5_K},
    {DType::Q6_K, gguf_tensor_type::Q6_K}, {DType::Q8_K, gguf_tensor_type::Q8_K}, {DType::PQ4, gguf_tensor_type::PQ4},
    {DType::PQ8, gguf_tensor_type::PQ8}, {DType::PQ5, gguf_tensor_type::PQ5},
};
}  // namespace

std::optional<DType> dtype_from_gguf(uint32_t type_id) {
  for (const auto& e : kTypeIds)
    if (e.id == type_id) return e.type;
  return std::nullopt;
}

uint32_t gguf_type_id(DType t) {
  for (const auto& e : kTypeIds)
    if (e.type == t) return e.id;
  fail("no GGUF type id for tensor type ", dtype_name(t));
}

std::string gguf_supported_types() {
  std::string s;
  for (const auto& e : kTypeIds) s += (s.empty() ? "" : ", ") + std::string(dtype_name(e.type));
  return s;
}

uint64_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::String:
    case GgufType::Array:
      return 0;
  }
  return 0;
}

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  GgufFile g;
  g.file_ = std::move(file);
  const std::string& src = g.file_->path();
  ByteReader r(g.file_->data(), g.file_->size(), src);

  if (r.size() < 4 || std::memcmp(r.bytes(4, "magic"), "GGUF", 4) != 0) fail(src, ": not a GGUF file (bad magic)");
  g.version_ = r.u32("version");
  if (const uint32_t swapped = __builtin_bswap32(g.version_); swapped == 2 || swapped == 3)
    fail(src, ": a big-endian GGUF file (version ", swapped,
         " byte-swapped); Pocket reads little-endian GGUF, the layout of every file llama.cpp and ARM/x86 use");
  if (g.version_ != 2 && g.version_ != 3) fail(src, ": unsupported GGUF version ", g.version_, " (expected 2 or 3)");
  uint64_t n_tensors = r.u64("tensor count");
  uint64_t n_kv = r.u64("metadata count");
  // Smallest encodings: a key/value is 8 (key length) + 4 (type) + 1 byte;
  // a tensor info is 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 + 8.
  if (n_kv > r.remaining() / 13) fail(src, ": metadata count ", n_kv, " is impossible for a file of ", r.size(), " bytes");
  if (n_tensors > r.remaining() / 32)
    fail(src, ": tensor count ", n_tensors, " is impossible for a file of ", r.size(), " bytes");

  for (uint64_t k = 0; k < n_kv; ++k) {
    uint64_t klen = r.u64("metadata key length");
    if (klen > kMaxKeyLen) fail(src, ": metadata key #", k, " has length ", klen, " (max ", kMaxKeyLen, ")");
    std::string key(r.str(klen, "metadata key"));
    uint32_t t = r.u32("type of '" + key + "'");
    if (!is_known_type(t)) fail(src, ": metadata '", key, "' has unknown value type ", t);
    GgufValue v = read_value(r, static_cast<GgufType>(t), key, 0);
    if (!g.kv_.emplace(key, std::move(v)).second) fail(src, ": duplicate metadata key '", key, "'");
  }

  if (auto a = g.get_int("general.alignment")) {
    // The GGUF spec asks for a multiple of 8; below that an F16/F32
    // tensor's data may start at an odd address, and typed reads of it
    // would be misaligned (UBSan found one through fuzz_gguf_struct).
    if (*a < 8 || *a > (1 << 24) || !is_power_of_two(static_cast<uint64_t>(*a)))
      fail(src, ": general.alignment = ", *a, " is not a power of two in [8, 2^24] (GGUF needs a multiple of 8)");
    g.alignment_ = static_cast<uint32_t>(*a);
  }
  if (auto gs = g.get_int("pocket.quant.group_size")) {
    if (*gs > 1024 || !pq::valid_group(static_cast<int>(*gs)))
      fail(src, ": pocket.quant.group_size = ", *gs, " is not a supported group size (32, 64 or 128)");
    g.pq_group_ = static_cast<int>(*gs);
  }

  g.tensors_.reserve(static_cast<size_t>(n_tensors));
  std::set<std::string> seen;
  for (uint64_t ti = 0; ti < n_tensors; ++ti) {
    GgufTensorInfo t;
    uint64_t nlen = r.u64("tensor name length");
    if (nlen > kMaxNameLen) fail(src, ": tensor #", ti, " name length ", nlen, " is too long");
    t.name = std::string(r.str(nlen, "tensor name"));
    const std::string what = src + ": tensor '" + t.name + "'";
    uint32_t n_dims = r.u32("n_dims of tensor '" + t.name + "'");
    if (n_dims == 0 || n_dims > kMaxDims) fail(what, ": n_dims = ", n_dims, " (expected 1..", kMaxDims, ")");
    t.shape.assign(n_dims, 0);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = r.u64("dims of tensor '" + t.name + "'");
      if (ne == 0 || ne > kMaxDim) fail(what, ": dimension ", d, " is ", ne, " (must be in 1..2^40)");
      t.shape[n_dims - 1 - d] = static_cast<int64_t>(ne);  // GGUF lists the fastest dimension first
    }
    t.type_id = r.u32("type of tensor '" + t.name + "'");
    auto dt = dtype_from_gguf(t.type_id);
    if (!dt) fail(what, ": unsupported tensor type id ", t.type_id, " (supported: ", gguf_supported_types(), ")");
    t.type = *dt;
    if (is_pq(t.type) && g.pq_group_ == 0)
      fail(what, ": type ", dtype_name(t.type), " needs pocket.quant.group_size, which is missing");
    t.offset = r.u64("offset of tensor '" + t.name + "'");
    if (t.offset % g.alignment_ != 0)
      fail(what, ": data offset ", t.offset, " is not a multiple of the alignment ", g.alignment_);
    t.nbytes = tensor_nbytes(t.type, t.shape, g.pq_group_, what);
    if (!seen.insert(t.name).second) fail(what, ": duplicate tensor name");
    g.tensors_.push_back(std::move(t));
  }

  g.data_offset_ = checked_align_up(r.offset(), g.alignment_, src + ": data section offset");
  uint64_t data_size = g.data_offset_ <= r.size() ? r.size() - g.data_offset_ : 0;
  for (const auto& t : g.tensors_) {
    uint64_t end = checked_add(t.offset, t.nbytes, src + ": tensor '" + t.name + "' end");
    if (end > data_size)
      fail(src, ": tensor '", t.name, "' (", t.nbytes, " bytes at data offset ", t.offset,
           ") extends past the end of the file (data section holds ", data_size, " bytes)");
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (is_signed(v->type)) return v->i;
  if (is_unsigned(v->type)) {
    if (v->u > static_cast<uint64_t>(INT64_MAX)) fail(path(), ": metadata '", key, "' = ", v->u, " is too large");
    return static_cast<int64_t>(v->u);
  }
  fail(path(), ": metadata '", key, "' should be an integer but is ", gguf_type_name(v->type));
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (is_signed(v->type)) return static_cast<double>(v->i);
  if (is_unsigned(v->type)) return static_cast<double>(v->u);
  fail(path(), ": metadata '", key, "' should be a number but is ", gguf_type_name(v->type));
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::Bool) return v->u != 0;
  fail(path(), ": metadata '", key, "' should be a bool but is ", gguf_type_name(v->type));
}

std::optional<std::string_view> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufType::String) return v->str;
  fail(path(), ": metadata '", key, "' should be a string but is ", gguf_type_name(v->type));
}

const GgufValue& GgufFile::expect_array(const std::string& key, const GgufValue& v) const {
  if (v.type != GgufType::Array) fail(path(), ": metadata '", key, "' should be an array but is ", gguf_type_name(v.type));
  return v;
}

std::vector<std::string_view> GgufFile::get_string_array(const std::string& key, bool required) const {
  const GgufValue* v = find(key);
  if (!v) {
    if (required) fail(path(), ": required metadata '", key, "' is missing");
    return {};
  }
  const GgufValue& a = expect_array(key, *v);
  if (a.elem_type != GgufType::String)
    fail(path(), ": metadata '", key, "' should be an array of strings but holds ", gguf_type_name(a.elem_type));
  return a.strings;
}

std::vector<float> GgufFile::get_float_array(const std::string& key, bool required) const {
  const GgufValue* v = find(key);
  if (!v) {
    if (required) fail(path(), ": required metadata '", key, "' is missing");
    return {};
  }
  const GgufValue& a = expect_array(key, *v);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(a.count));  // a.raw holds count elements, checked by parse()
  if (a.elem_type == GgufType::F32) {
    for (uint64_t i = 0; i < a.count; ++i) out.push_back(load<float>(a.raw + 4 * i));
  } else if (a.elem_type == GgufType::F64) {
    constexpr double kMax = std::numeric_limits<float>::max();
    for (uint64_t i = 0; i < a.count; ++i) {
      double d = load<double>(a.raw + 8 * i);
      // A finite double beyond float's range would make the conversion undefined: saturate it.
      if (std::isfinite(d)) d = std::clamp(d, -kMax, kMax);
      out.push_back(static_cast<float>(d));
    }
  } else {
    fail(path(), ": metadata '", key, "' should be an array of floats but holds ", gguf_type_name(a.elem_type));
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key, bool required) const {
  const GgufValue* v = find(key);
  if (!v) {
    if (required) fail(path(), ": required metadata '", key, "' is missing");
    return {};
  }
  const GgufValue& a = expect_array(key, *v);
  if (!is_signed(a.elem_type) && !is_unsigned(a.elem_type))
    fail(path(), ": metadata '", key, "' should be an array of integers but holds ", gguf_type_name(a.elem_type));
  uint64_t es = gguf_scalar_size(a.elem_type);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(a.count));
  for (uint64_t i = 0; i < a.count; ++i) {
    GgufValue e;
    decode_scalar(a.elem_type, a.raw + es * i, e);
    if (is_unsigned(a.elem_type) && e.u > static_cast<uint64_t>(INT64_MAX))
      fail(path(), ": metadata '", key, "'[", i, "] = ", e.u, " is too large");
    out.push_back(is_signed(a.elem_type) ? e.i : static_cast<int64_t>(e.u));
  }
  return out;
}

std::pair<const uint8_t*, uint64_t> GgufFile::get_byte_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path(), ": required metadata '", key, "' is missing");
  const GgufValue& a = expect_array(key, *v);
  if (a.elem_type != GgufType::U8 && a.elem_type != GgufType::I8)
    fail(path(), ": metadata '", key, "' should be an array of bytes but holds ", gguf_type_name(a.elem_type));
  return {a.raw, a.count};
}

TensorView GgufFile::view(const GgufTensorInfo& t) const {
  TensorView v;
  v.name = t.name;
  v.type = t.type;
  v.shape = t.shape;
  v.data = tensor_data(t);
  v.nbytes = t.nbytes;
  v.group = is_pq(t.type) ? pq_group() : 0;
  return v;
}

}  // namespace pocket
