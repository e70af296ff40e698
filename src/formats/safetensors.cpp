#include "formats/safetensors.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/byte_reader.h"
#include "util/atomic_file.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

namespace {

using nlohmann::json;

constexpr int kMaxJsonDepth = 8;  // the header is {name: {shape: [..]}}: depth 3
constexpr uint64_t kMaxDim = uint64_t{1} << 40;

std::optional<DType> dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  return std::nullopt;
}

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    default: fail("safetensors: tensor type ", dtype_name(t), " cannot be stored");
  }
}

uint64_t json_size(const json& v, const std::string& what) {
  if (!v.is_number_unsigned()) fail(what, " is not a non-negative integer");
  return v.get<uint64_t>();
}

json parse_header(std::string_view text, const std::string& src) {
  // Refuse deep nesting while parsing rather than after building it.
  json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) fail(src, ": safetensors header nests deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const json::exception& e) {
    fail(src, ": safetensors header is not valid JSON: ", e.what());
  }
}

TensorView parse_entry(const std::string& name, const json& e, const uint8_t* data, uint64_t data_size,
                       const std::string& src) {
  const std::string what = src + ": tensor '" + name + "'";
  if (!e.is_object()) fail(what, ": header entry is not an object");
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) fail(what, ": 'dtype' is missing or not a string");
  auto type = dtype_from_safetensors(dt->get<std::string>());
  if (!type) fail(what, ": unsupported dtype '", dt->get<std::string>(), "' (supported: F32, F16, BF16)");

  TensorView t;
  t.name = name;
  t.type = *type;
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) fail(what, ": 'shape' is missing or not an array");
  if (sh->size() > 8) fail(what, ": shape has ", sh->size(), " dimensions");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    uint64_t n = json_size(d, what + ": shape entry");
    if (n > kMaxDim) fail(what, ": dimension ", n, " is too large");
    t.shape.push_back(static_cast<int64_t>(n));
    numel = checked_mul(numel, n, what);
  }
  t.nbytes = checked_mul(numel, static_cast<uint64_t>(dtype_block_bytes(t.type)), what);

  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2) fail(what, ": 'data_offsets' is not [begin, end]");
  uint64_t begin = json_size((*off)[0], what + ": data_offsets begin");
  uint64_t end = json_size((*off)[1], what + ": data_offsets end");
  if (begin > end) fail(what, ": data_offsets begin ", begin, " is after end ", end);
  if (end > data_size) fail(what, ": data_offsets end ", end, " is past the data section (", data_size, " bytes)");
  if (end - begin != t.nbytes)
    fail(what, ": data_offsets span ", end - begin, " bytes but dtype and shape need ", t.nbytes);
  t.data = data + begin;
  return t;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  ByteReader r(f.file_->data(), f.file_->size(), path);
  uint64_t n = r.u64("safetensors header length");
  if (n > r.remaining())
    fail(path, ": safetensors header length ", n, " exceeds the file size (", r.size(), " bytes)");
  if (n > kMaxSafetensorsHeader) fail(path, ": safetensors header length ", n, " is over the ", kMaxSafetensorsHeader, " byte limit");
  std::string_view text = r.str(n, "safetensors header");
  const uint8_t* data = r.data() + r.offset();
  const uint64_t data_size = r.remaining();

  json h = parse_header(text, path);
  if (!h.is_object()) fail(path, ": safetensors header is not a JSON object");
  for (const auto& [key, value] : h.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(path, ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(path, ": __metadata__ '", mk, "' is not a string");
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    f.tensors_.emplace(key, parse_entry(key, value, data, data_size, path));
  }
  return f;
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (auto d : t.shape) {
      if (d < 0) fail(path, ": tensor '", t.name, "' has a negative dimension");
      numel = checked_mul(numel, static_cast<uint64_t>(d), path);
    }
    uint64_t nbytes = numel * static_cast<uint64_t>(dtype_block_bytes(t.type));
    h[t.name] = {{"dtype", safetensors_dtype(t.type)}, {"shape", t.shape}, {"data_offsets", {off, off + nbytes}}};
    off += nbytes;
  }
  std::string text = h.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // keep the data section 8-byte aligned

  write_file_atomically(path, [&](std::ostream& out) {
    uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
      uint64_t nbytes = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(dtype_block_bytes(t.type));
      out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(nbytes));
    }
  });
}

}  // namespace pocket
