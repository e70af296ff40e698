// fuzz_gguf_struct: the fuzz_gguf target (one model file through
// open_model() and what the CLI does next) with a GGUF-aware mutator.
// Byte flips rarely get a GGUF past its length fields and counts into the
// deeper states (tensor tables whose sizes overflow, offsets past the data,
// arrays whose count disagrees with their bytes, an alignment of 0), so this
// mutator parses the input into header, key/values, tensor infos and the
// data section, changes one to three fields to a hostile or shifted value, and writes the
// file out again with every other length and the data alignment consistent. Inputs it cannot parse
// get libFuzzer's byte mutations instead; one mutation in eight is a byte
// mutation anyway, so the parser's own bounds stay fuzzed.
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fuzz_util.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// GGUF value type ids (the format's enum).
enum : uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

size_t scalar_size(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

struct Reader {
  const uint8_t* p;
  size_t n, at = 0;
  bool ok = true;
  bool take(void* out, size_t k) {
    if (!ok || n - at < k) return ok = false;
    std::memcpy(out, p + at, k);
    at += k;
    return true;
  }
  uint64_t u64() { uint64_t v = 0; take(&v, 8); return v; }
  uint32_t u32() { uint32_t v = 0; take(&v, 4); return v; }
  std::string str() {
    const uint64_t len = u64();
    if (!ok || len > n - at) { ok = false; return {}; }
    std::string s(reinterpret_cast<const char*>(p + at), len);
    at += len;
    return s;
  }
  // Skips one value of type t (arrays: nested), returning false when malformed.
  bool skip_value(uint32_t t, int depth = 0) {
    if (t == kString) { str(); return ok; }
    if (t == kArray) {
      const uint32_t et = u32();
      const uint64_t count = u64();
      if (!ok || depth > 2 || count > (1u << 20)) return ok = false;
      for (uint64_t i = 0; i < count && ok; ++i) skip_value(et, depth + 1);
      return ok;
    }
    const size_t k = scalar_size(t);
    if (!k || n - at < k) return ok = false;
    at += k;
    return true;
  }
};

struct Kv {
  std::string key;
  uint32_t type;
  std::string value;  // serialized value bytes as in the file
};
struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};
struct Gguf {
  uint32_t version;
  std::vector<Kv> kvs;
  std::vector<TensorInfo> tensors;
  std::string blob;  // the data section (from the aligned start after the tensor infos)
};

// general.alignment when it is a usable u32, else GGUF's default of 32: the
// data section starts at the next multiple of it after the tensor infos.
uint64_t alignment(const std::vector<Kv>& kvs) {
  for (const Kv& kv : kvs)
    if (kv.key == "general.alignment" && kv.type == kU32 && kv.value.size() == 4) {
      uint32_t a;
      std::memcpy(&a, kv.value.data(), 4);
      if (a > 0 && a <= (1u << 16)) return a;
    }
  return 32;
}

std::optional<Gguf> parse(const uint8_t* data, size_t size) {
  Reader r{data, size};
  char magic[4];
  if (!r.take(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0) return std::nullopt;
  Gguf g;
  g.version = r.u32();
  const uint64_t nt = r.u64(), nkv = r.u64();
  if (!r.ok || nt > 4096 || nkv > 4096) return std::nullopt;
  for (uint64_t i = 0; i < nkv; ++i) {
    Kv kv;
    kv.key = r.str();
    kv.type = r.u32();
    const size_t begin = r.at;
    if (!r.ok || !r.skip_value(kv.type)) return std::nullopt;
    kv.value.assign(reinterpret_cast<const char*>(data + begin), r.at - begin);
    g.kvs.push_back(std::move(kv));
  }
  for (uint64_t i = 0; i < nt; ++i) {
    TensorInfo t;
    t.name = r.str();
    const uint32_t nd = r.u32();
    if (!r.ok || nd > 8) return std::nullopt;
    t.dims.resize(nd);
    for (auto& d : t.dims) d = r.u64();
    t.type = r.u32();
    t.offset = r.u64();
    if (!r.ok) return std::nullopt;
    g.tensors.push_back(std::move(t));
  }
  const uint64_t a = alignment(g.kvs), start = (r.at + a - 1) / a * a;
  if (start < size) g.blob.assign(reinterpret_cast<const char*>(data + start), size - start);
  return g;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

std::string serialize(const Gguf& g, std::optional<uint64_t> nt_field, std::optional<uint64_t> nkv_field) {
  std::string out = "GGUF";
  put<uint32_t>(out, g.version);
  put<uint64_t>(out, nt_field.value_or(g.tensors.size()));
  put<uint64_t>(out, nkv_field.value_or(g.kvs.size()));
  for (const Kv& kv : g.kvs) {
    put_str(out, kv.key);
    put<uint32_t>(out, kv.type);
    out += kv.value;
  }
  for (const TensorInfo& t : g.tensors) {
    put_str(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, t.offset);
  }
  const uint64_t a = alignment(g.kvs);
  out.resize((out.size() + a - 1) / a * a, '\0');
  return out + g.blob;
}

// Values that break size arithmetic: 0, 1, powers of two around the 32- and
// 64-bit limits, the maximum, and small shifts of the old value.
uint64_t hostile(std::mt19937_64& rng, uint64_t old) {
  static const uint64_t kValues[] = {0,           1,          2,          31,          32,         255,
                                     65535,       1ull << 31, 1ull << 32, (1ull << 32) + 1, 1ull << 40,
                                     1ull << 62,  1ull << 63, ~0ull,      ~0ull - 31,  0x7fffffffffffffffull};
  switch (rng() % 4) {
    case 0: return old + 1;
    case 1: return old - 1;
    case 2: return old * 2 + (rng() % 2);
    default: return kValues[rng() % std::size(kValues)];
  }
}

void set_le(std::string& bytes, size_t at, size_t k, uint64_t v) {
  for (size_t i = 0; i < k && at + i < bytes.size(); ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(const std::string& bytes, size_t at, size_t k) {
  uint64_t v = 0;
  for (size_t i = 0; i < k && at + i < bytes.size(); ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return v;
}

// Changes one field of `g`; may set the header counts' override instead.
void mutate(Gguf& g, std::mt19937_64& rng, std::optional<uint64_t>& nt_field, std::optional<uint64_t>& nkv_field) {
  const bool has_t = !g.tensors.empty(), has_kv = !g.kvs.empty();
  switch (rng() % 11) {
    case 0:  // a tensor dimension
      if (has_t) {
        auto& t = g.tensors[rng() % g.tensors.size()];
        if (!t.dims.empty()) {
          auto& d = t.dims[rng() % t.dims.size()];
          d = hostile(rng, d);
        }
      }
      return;
    case 1:  // a tensor's element type: any id, the known ones more often
      if (has_t) g.tensors[rng() % g.tensors.size()].type = static_cast<uint32_t>(rng() % 4 ? rng() % 48 : rng());
      return;
    case 2:  // a tensor's data offset, also near the end of the blob
      if (has_t) {
        auto& t = g.tensors[rng() % g.tensors.size()];
        t.offset = rng() % 2 ? hostile(rng, t.offset) : g.blob.size() - rng() % 64;
      }
      return;
    case 3:  // a tensor's rank
      if (has_t) g.tensors[rng() % g.tensors.size()].dims.resize(rng() % 6, 1 + rng() % 64);
      return;
    case 4:  // drop, duplicate or rename a tensor
      if (has_t) {
        const size_t i = rng() % g.tensors.size();
        switch (rng() % 3) {
          case 0: g.tensors.erase(g.tensors.begin() + static_cast<long>(i)); break;
          case 1: g.tensors.push_back(g.tensors[i]); break;
          default: g.tensors[i].name = g.tensors[rng() % g.tensors.size()].name; break;
        }
      }
      return;
    case 5:  // an integer value (config sizes, token ids, alignment)
      if (has_kv) {
        auto& kv = g.kvs[rng() % g.kvs.size()];
        const size_t k = scalar_size(kv.type);
        if (k && kv.type != kF32 && kv.type != kF64) set_le(kv.value, 0, k, hostile(rng, get_le(kv.value, 0, k)));
      }
      return;
    case 6:  // an array's or a string's count, its bytes unchanged
      if (has_kv) {
        auto& kv = g.kvs[rng() % g.kvs.size()];
        if (kv.type == kArray) set_le(kv.value, 4, 8, hostile(rng, get_le(kv.value, 4, 8)));
        if (kv.type == kString) set_le(kv.value, 0, 8, hostile(rng, get_le(kv.value, 0, 8)));
      }
      return;
    case 7:  // an array's element type
      if (has_kv) {
        auto& kv = g.kvs[rng() % g.kvs.size()];
        if (kv.type == kArray) set_le(kv.value, 0, 4, rng() % 14);
      }
      return;
    case 8:  // a value's type (its bytes then read as another type)
      if (has_kv) g.kvs[rng() % g.kvs.size()].type = static_cast<uint32_t>(rng() % 14);
      return;
    case 9:  // drop or duplicate a key
      if (has_kv) {
        const size_t i = rng() % g.kvs.size();
        if (rng() % 2)
          g.kvs.erase(g.kvs.begin() + static_cast<long>(i));
        else
          g.kvs.push_back(g.kvs[i]);
      }
      return;
    default:  // the header's counts, or the data cut short / extended
      switch (rng() % 4) {
        case 0: nt_field = hostile(rng, g.tensors.size()); break;
        case 1: nkv_field = hostile(rng, g.kvs.size()); break;
        case 2: g.blob.resize(g.blob.size() ? rng() % g.blob.size() : 0); break;
        default: g.blob.append(rng() % 256, '\0'); break;
      }
      return;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  std::optional<Gguf> g = rng() % 8 ? parse(data, size) : std::nullopt;
  if (!g) return LLVMFuzzerMutate(data, size, max_size);
  std::optional<uint64_t> nt_field, nkv_field;
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < rounds; ++i) mutate(*g, rng, nt_field, nkv_field);
  const std::string out = serialize(*g, nt_field, nkv_field);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  static const std::string path = scratch_path("gguf_struct", "model.gguf");
  write_file(path, data, size);
  guarded([&] { exercise_model(path); });
  return 0;
}
