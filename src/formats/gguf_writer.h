// A small GGUF v3 writer: typed metadata (incl. nested arrays) and tensors
// whose bytes are streamed to the file from caller memory (e.g. a mapped
// model) or from a callback, so no full-model heap copy is needed. Used by
// `pocket quantize` for Pocket files and by tests.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "formats/gguf.h"
#include "core/config.h"
#include "tokenizer/vocab.h"

namespace pocket {

// Highest `pocket.version` this build reads and the one it writes.
inline constexpr int kPocketFileVersion = 1;

// An encoded metadata value: its type and the bytes that follow the type id.
struct GgufMeta {
  GgufType type = GgufType::U8;
  std::string payload;

  static GgufMeta u8(uint8_t v);
  static GgufMeta i8(int8_t v);
  static GgufMeta u16(uint16_t v);
  static GgufMeta i16(int16_t v);
  static GgufMeta u32(uint32_t v);
  static GgufMeta i32(int32_t v);
  static GgufMeta u64(uint64_t v);
  static GgufMeta i64(int64_t v);
  static GgufMeta f32(float v);
  static GgufMeta f64(double v);
  static GgufMeta boolean(bool v);
  static GgufMeta string(std::string_view v);
  // Array of values that all have the same type (may be arrays themselves);
  // `elem_type` is needed for an empty array.
  static GgufMeta array(const std::vector<GgufMeta>& items, GgufType elem_type);
  static GgufMeta strings(const std::vector<std::string>& v);
  static GgufMeta f32s(const std::vector<float>& v);
  static GgufMeta i32s(const std::vector<int32_t>& v);
  static GgufMeta bytes(const uint8_t* data, size_t n);
};

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);  // a power of two >= 8; stored as general.alignment

  // Sets (or replaces) a key; keys are written in first-set order.
  void set(const std::string& key, GgufMeta value);
  void set_u32(const std::string& key, uint32_t v) { set(key, GgufMeta::u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, GgufMeta::i32(v)); }
  void set_f32(const std::string& key, float v) { set(key, GgufMeta::f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, GgufMeta::boolean(v)); }
  void set_string(const std::string& key, std::string_view v) { set(key, GgufMeta::string(v)); }

  // A tensor whose `nbytes` bytes are at `data`, which must stay valid until
  // write() returns. `shape` is slowest first; `group` is the PQ group size
  // (PQ tensors also set pocket.quant.group_size, which must agree).
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, const void* data,
                  uint64_t nbytes, int group = 0);
  // A tensor whose bytes `produce` writes to the stream during write(); it
  // must write exactly the tensor's size.
  using Producer = std::function<void(std::ostream&)>;
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, Producer produce, int group = 0);

  // Writes the file (to `path`.tmp, renamed on success). Throws pocket::Error.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    int group;
    const void* data;
    Producer produce;
  };
  void add(Tensor t);

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufMeta>> kv_;
  std::vector<Tensor> tensors_;
};

// A parsed metadata value as the writer takes it (copying a file's keys).
// With `keep` (indices), an array keeps only those elements, in that order.
GgufMeta to_meta(const GgufValue& v, const std::vector<int32_t>* keep = nullptr);

// general.architecture and the `<arch>.*` hyper-parameter keys for `c`.
void add_config_metadata(GgufWriter& w, const ModelConfig& c);
// tokenizer.ggml.* for `v` ("gpt2" for byte-level BPE, "llama" for
// SentencePiece) and tokenizer.chat_template when non-empty.
void add_vocab_metadata(GgufWriter& w, const Vocab& v, const std::string& chat_template);

}  // namespace pocket
