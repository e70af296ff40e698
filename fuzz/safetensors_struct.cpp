// fuzz_safetensors_struct: the fuzz_safetensors target (one model.safetensors
// beside a tiny Llama config.json, opened as `pocket info` does) with a
// header-aware mutator. A safetensors file is a u64 header length, a JSON
// header (per tensor: dtype, shape, data_offsets; __metadata__) and the data;
// byte flips mostly break the length or the JSON and stop there. This mutator
// parses the header, changes tensor entries (dtypes, shapes and offsets made
// hostile: overflowing products, offsets past the data or overlapping, ranks
// 0..5, entries dropped or duplicated, any node through json_mutator.h), and
// writes the file out again with a matching length and the data unchanged.
// One mutation in eight is a plain byte mutation, so the length field and
// the JSON parser stay fuzzed too.
#include <cstring>
#include <random>

#include "json_mutator.h"
#include "safetensors.cpp"  // the target itself; this file adds only the mutator

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using pocket::fuzz::Json;

const std::vector<std::string> kPool = {"F32", "F16", "BF16", "I8", "U8", "I16", "I32", "I64", "F64", "BOOL",
                                        "F8_E4M3", "F8_E5M2", "Q4", "", "__metadata__", "format", "pt",
                                        "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                                        "model.layers.0.self_attn.q_proj.weight"};

void mutate_tensor(Json& t, std::mt19937_64& rng, uint64_t data_size) {
  using pocket::fuzz::hostile_int;
  switch (rng() % 4) {
    case 0:
      t["dtype"] = kPool[rng() % 12];
      return;
    case 1: {  // a shape: rank 0..5, dims hostile or small
      Json shape = Json::array();
      for (size_t r = rng() % 6; r; --r) shape.push_back(rng() % 3 ? Json(1 + rng() % 300) : Json(hostile_int(rng, 32)));
      t["shape"] = shape;
      return;
    }
    case 2: {  // offsets: hostile, reversed, past the end, or overlapping the start
      const int64_t a = static_cast<int64_t>(rng() % (data_size + 1));
      switch (rng() % 4) {
        case 0: t["data_offsets"] = {hostile_int(rng, a), hostile_int(rng, a)}; break;
        case 1: t["data_offsets"] = {a, a > 0 ? a - 1 : 0}; break;
        case 2: t["data_offsets"] = {a, static_cast<int64_t>(data_size) + 1 + static_cast<int64_t>(rng() % 64)}; break;
        default: t["data_offsets"] = {0, a}; break;
      }
      return;
    }
    default:
      t.erase(rng() % 2 ? "shape" : "data_offsets");
      return;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  uint64_t header_len = 0;
  if (rng() % 8 == 0 || size < 8) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8) return LLVMFuzzerMutate(data, size, max_size);
  const std::string_view header(reinterpret_cast<const char*>(data) + 8, header_len);
  std::optional<Json> j = pocket::fuzz::parse_json(header);
  if (!j || !j->is_object()) return LLVMFuzzerMutate(data, size, max_size);
  const uint64_t data_size = size - 8 - header_len;

  std::vector<std::string> tensors;
  for (auto& [k, v] : j->items())
    if (k != "__metadata__" && v.is_object()) tensors.push_back(k);
  if (!tensors.empty() && rng() % 3) {
    const std::string& name = tensors[rng() % tensors.size()];
    switch (rng() % 5) {
      case 0: (*j).erase(name); break;                                              // a tensor missing
      case 1: (*j)[kPool[12 + rng() % (kPool.size() - 12)]] = (*j)[name]; break;   // one under another's name
      default: mutate_tensor((*j)[name], rng, data_size); break;
    }
  } else {
    pocket::fuzz::mutate_json(*j, rng, kPool);
  }

  std::string out_header = pocket::fuzz::dump_json(*j);
  if (rng() % 4 == 0) out_header.append(rng() % 16, ' ');  // the format allows trailing spaces
  const uint64_t new_len = out_header.size();
  const size_t out_size = 8 + new_len + data_size;
  if (out_size > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::string out(out_size, '\0');
  std::memcpy(out.data(), &new_len, 8);
  std::memcpy(out.data() + 8, out_header.data(), new_len);
  std::memcpy(out.data() + 8 + new_len, data + 8 + header_len, data_size);
  std::memcpy(data, out.data(), out_size);
  return out_size;
}
