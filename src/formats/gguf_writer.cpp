#include "formats/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "core/tensor.h"
#include "util/atomic_file.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; so is every supported target");

namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}

template <class T>
GgufMeta scalar(GgufType type, T v) {
  GgufMeta m;
  m.type = type;
  put(m.payload, v);
  return m;
}

}  // namespace

GgufMeta GgufMeta::u8(uint8_t v) { return scalar(GgufType::U8, v); }
GgufMeta GgufMeta::i8(int8_t v) { return scalar(GgufType::I8, v); }
GgufMeta GgufMeta::u16(uint16_t v) { return scalar(GgufType::U16, v); }
GgufMeta GgufMeta::i16(int16_t v) { return scalar(GgufType::I16, v); }
GgufMeta GgufMeta::u32(uint32_t v) { return scalar(GgufType::U32, v); }
GgufMeta GgufMeta::i32(int32_t v) { return scalar(GgufType::I32, v); }
GgufMeta GgufMeta::u64(uint64_t v) { return scalar(GgufType::U64, v); }
GgufMeta GgufMeta::i64(int64_t v) { return scalar(GgufType::I64, v); }
GgufMeta GgufMeta::f32(float v) { return scalar(GgufType::F32, v); }
GgufMeta GgufMeta::f64(double v) { return scalar(GgufType::F64, v); }
GgufMeta GgufMeta::boolean(bool v) { return scalar(GgufType::Bool, static_cast<uint8_t>(v ? 1 : 0)); }

GgufMeta GgufMeta::string(std::string_view v) {
  GgufMeta m;
  m.type = GgufType::String;
  put_string(m.payload, v);
  return m;
}

GgufMeta GgufMeta::array(const std::vector<GgufMeta>& items, GgufType elem_type) {
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(elem_type));
  put<uint64_t>(m.payload, items.size());
  for (const auto& it : items) {
    if (it.type != elem_type)
      fail("GGUF writer: array of ", gguf_type_name(elem_type), " given an element of type ", gguf_type_name(it.type));
    m.payload += it.payload;
  }
  return m;
}

GgufMeta GgufMeta::strings(const std::vector<std::string>& v) {
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(GgufType::String));
  put<uint64_t>(m.payload, v.size());
  for (const auto& s : v) put_string(m.payload, s);
  return m;
}

GgufMeta GgufMeta::f32s(const std::vector<float>& v) {
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(GgufType::F32));
  put<uint64_t>(m.payload, v.size());
  for (float f : v) put(m.payload, f);
  return m;
}

GgufMeta GgufMeta::i32s(const std::vector<int32_t>& v) {
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(GgufType::I32));
  put<uint64_t>(m.payload, v.size());
  for (int32_t i : v) put(m.payload, i);
  return m;
}

GgufMeta GgufMeta::bytes(const uint8_t* data, size_t n) {
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(GgufType::U8));
  put<uint64_t>(m.payload, n);
  m.payload.append(reinterpret_cast<const char*>(data), n);
  return m;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment < 8 || (alignment & (alignment - 1)) != 0)
    fail("GGUF writer: alignment ", alignment, " is not a power of two of at least 8");
  if (alignment != 32) set_u32("general.alignment", alignment);
}

void GgufWriter::set(const std::string& key, GgufMeta value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add(Tensor t) {
  for (const auto& o : tensors_)
    if (o.name == t.name) fail("GGUF writer: duplicate tensor '", t.name, "'");
  if (t.shape.empty() || t.shape.size() > 4) fail("GGUF writer: tensor '", t.name, "' must have 1..4 dimensions");
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, const void* data,
                            uint64_t nbytes, int group) {
  uint64_t expect = tensor_nbytes(type, shape, group, "GGUF writer: tensor '" + name + "'");
  if (nbytes != expect)
    fail("GGUF writer: tensor '", name, "' given ", nbytes, " bytes, its type and shape need ", expect);
  add({name, type, std::move(shape), nbytes, group, data, nullptr});
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, Producer produce,
                            int group) {
  uint64_t nbytes = tensor_nbytes(type, shape, group, "GGUF writer: tensor '" + name + "'");
  add({name, type, std::move(shape), nbytes, group, nullptr, std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  // PQ tensors share the file-wide pocket.quant.group_size.
  std::vector<std::pair<std::string, GgufMeta>> kv = kv_;
  int group = 0;
  for (const auto& t : tensors_) {
    if (!is_pq(t.type)) continue;
    if (group != 0 && t.group != group) fail("GGUF writer: PQ tensors with different group sizes (", group, ", ", t.group, ")");
    group = t.group;
  }
  if (group != 0) {
    GgufMeta g = GgufMeta::u32(static_cast<uint32_t>(group));
    bool found = false;
    for (const auto& [k, v] : kv)
      if (k == "pocket.quant.group_size") {
        found = true;
        if (v.payload != g.payload) fail("GGUF writer: pocket.quant.group_size disagrees with the PQ tensors' group ", group);
      }
    if (!found) kv.emplace_back("pocket.quant.group_size", g);
  }

  std::string head;
  head.append("GGUF", 4);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv.size());
  for (const auto& [k, v] : kv) {
    put_string(head, k);
    put<uint32_t>(head, static_cast<uint32_t>(v.type));
    head += v.payload;
  }
  std::vector<uint64_t> offsets;
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(head, static_cast<uint64_t>(*it));
    put<uint32_t>(head, gguf_type_id(t.type));
    off = checked_align_up(off, alignment_, "GGUF writer");
    put<uint64_t>(head, off);
    offsets.push_back(off);
    off = checked_add(off, t.nbytes, "GGUF writer");
  }
  head.resize(checked_align_up(head.size(), alignment_, "GGUF writer"), '\0');

  write_file_atomically(path, [&](std::ostream& out) {
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    const auto data_start = out.tellp();
    static const char zeros[64 * 1024] = {};
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      uint64_t pos = static_cast<uint64_t>(out.tellp() - data_start);
      while (pos < offsets[i]) {  // alignment padding (< alignment bytes)
        uint64_t n = std::min<uint64_t>(offsets[i] - pos, sizeof(zeros));
        out.write(zeros, static_cast<std::streamsize>(n));
        pos += n;
      }
      if (t.produce) {
        t.produce(out);
        uint64_t wrote = static_cast<uint64_t>(out.tellp() - data_start) - pos;
        if (out && wrote != t.nbytes)
          fail(path, ": producer of tensor '", t.name, "' wrote ", wrote, " bytes, expected ", t.nbytes);
      } else {
        out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
      }
      if (!out) fail(path, ": write error (disk full?)");
    }
  });
}

namespace {

int32_t token_type_to_gguf(TokenType t) {
  switch (t) {
    case TokenType::Normal: return 1;
    case TokenType::Unknown: return 2;
    case TokenType::Control: return 3;
    case TokenType::UserDefined: return 4;
    case TokenType::Unused: return 5;
    case TokenType::Byte: return 6;
  }
  return 1;
}

}  // namespace

void add_config_metadata(GgufWriter& w, const ModelConfig& c) {
  const std::string a = arch_name(c.arch);
  w.set_string("general.architecture", a);
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(c.dim));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(c.max_seq_len));
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
  w.set_f32(a + ".rope.freq_base", c.rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  if (c.arch == Arch::Gemma3) {  // the rest follows from the architecture (apply_arch_defaults)
    if (c.sliding_window > 0) {
      w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
      w.set_u32(a + ".attention.sliding_window_pattern", static_cast<uint32_t>(c.swa_pattern));
      w.set_f32(a + ".rope.freq_base_swa", c.rope_theta_local);
    }
    if (c.final_softcap > 0.0f) w.set_f32(a + ".final_logit_softcapping", c.final_softcap);
  }
}

void add_vocab_metadata(GgufWriter& w, const Vocab& v, const std::string& chat_template) {
  const bool bpe = v.kind == TokenizerKind::ByteLevelBPE;
  w.set_string("tokenizer.ggml.model", bpe ? "gpt2" : "llama");
  if (bpe) {
    switch (v.pre) {
      case PreTokenizer::Qwen2: w.set_string("tokenizer.ggml.pre", "qwen2"); break;
      case PreTokenizer::Llama3: w.set_string("tokenizer.ggml.pre", "llama-bpe"); break;
      case PreTokenizer::GPT2:
      case PreTokenizer::None: w.set_string("tokenizer.ggml.pre", "gpt-2"); break;
    }
  }
  w.set("tokenizer.ggml.tokens", GgufMeta::strings(v.tokens));
  if (!v.scores.empty()) w.set("tokenizer.ggml.scores", GgufMeta::f32s(v.scores));
  std::vector<int32_t> types;
  types.reserve(v.types.size());
  for (auto t : v.types) types.push_back(token_type_to_gguf(t));
  w.set("tokenizer.ggml.token_type", GgufMeta::i32s(types));
  if (bpe) {
    std::vector<std::string> merges;
    merges.reserve(v.merges.size());
    for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
    w.set("tokenizer.ggml.merges", GgufMeta::strings(merges));
  }
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.set_u32(key, static_cast<uint32_t>(value));
  };
  id("tokenizer.ggml.bos_token_id", v.bos_id);
  id("tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
}


GgufMeta to_meta(const GgufValue& v, const std::vector<int32_t>* keep) {
  switch (v.type) {
    case GgufType::U8: return GgufMeta::u8(static_cast<uint8_t>(v.u));
    case GgufType::I8: return GgufMeta::i8(static_cast<int8_t>(v.i));
    case GgufType::U16: return GgufMeta::u16(static_cast<uint16_t>(v.u));
    case GgufType::I16: return GgufMeta::i16(static_cast<int16_t>(v.i));
    case GgufType::U32: return GgufMeta::u32(static_cast<uint32_t>(v.u));
    case GgufType::I32: return GgufMeta::i32(static_cast<int32_t>(v.i));
    case GgufType::U64: return GgufMeta::u64(v.u);
    case GgufType::I64: return GgufMeta::i64(v.i);
    case GgufType::F32: return GgufMeta::f32(static_cast<float>(v.f));
    case GgufType::F64: return GgufMeta::f64(v.f);
    case GgufType::Bool: return GgufMeta::boolean(v.u != 0);
    case GgufType::String: return GgufMeta::string(v.str);
    case GgufType::Array: break;
  }
  std::vector<size_t> idx;
  if (keep) {
    for (int32_t k : *keep) {
      if (k < 0 || static_cast<uint64_t>(k) >= v.count) fail("GGUF array index ", k, " out of range");
      idx.push_back(static_cast<size_t>(k));
    }
  } else {
    for (size_t k = 0; k < v.count; ++k) idx.push_back(k);
  }
  if (v.elem_type == GgufType::String) {
    std::vector<std::string> s;
    for (size_t k : idx) s.emplace_back(v.strings[k]);
    return GgufMeta::strings(s);
  }
  if (v.elem_type == GgufType::Array) {
    std::vector<GgufMeta> items;
    for (size_t k : idx) items.push_back(to_meta(v.arrays[k]));
    return GgufMeta::array(items, GgufType::Array);
  }
  const int size = static_cast<int>(gguf_scalar_size(v.elem_type));
  GgufMeta m;
  m.type = GgufType::Array;
  put<uint32_t>(m.payload, static_cast<uint32_t>(v.elem_type));
  put<uint64_t>(m.payload, idx.size());
  for (size_t k : idx) m.payload.append(reinterpret_cast<const char*>(v.raw) + k * static_cast<size_t>(size), size);
  return m;
}

}  // namespace pocket
