#include "formats/llama2c.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "formats/external_vocab.h"
#include "formats/model_checks.h"
#include "tokenizer/llama2c_vocab.h"
#include "util/checked.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace pocket {

namespace {

constexpr uint32_t kMagicV1 = 0x616b3432;  // "ak42"
constexpr size_t kHeaderV1 = 256;
constexpr size_t kHeaderLegacy = 7 * 4;

struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared = true;
  int version = 0;  // 0 = legacy
};

Header read_header(const uint8_t* p, size_t size) {
  Header h{};
  size_t off = 0;
  uint32_t magic = 0;
  if (size >= 4) std::memcpy(&magic, p, 4);
  if (magic == kMagicV1) {
    if (size < kHeaderV1) return h;
    std::memcpy(&h.version, p + 4, 4);
    off = 8;
  } else if (size < kHeaderLegacy) {
    return h;
  }
  int32_t f[7];
  std::memcpy(f, p + off, sizeof(f));
  h.dim = f[0], h.hidden_dim = f[1], h.n_layers = f[2], h.n_heads = f[3], h.n_kv_heads = f[4];
  h.vocab_size = f[5], h.seq_len = f[6];
  if (magic == kMagicV1) {
    h.shared = p[off + sizeof(f)] != 0;
  } else {
    h.shared = h.vocab_size > 0;  // legacy: a negative vocab size means a separate classifier
    if (h.vocab_size < 0 && h.vocab_size > INT32_MIN) h.vocab_size = -h.vocab_size;
  }
  return h;
}

bool plausible(const Header& h) {
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  return in(h.dim, 1, 1 << 16) && in(h.hidden_dim, 1, 1 << 18) && in(h.n_layers, 1, 1024) &&
         in(h.n_heads, 1, 1024) && in(h.n_kv_heads, 1, 1024) && in(h.vocab_size, 1, 1 << 22) &&
         in(h.seq_len, 1, 1 << 22);
}

// The canonical tensors in file order for one version, as (name, shape).
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Entry> layout(const ModelConfig& c, Llama2cVersion v, bool shared) {
  const int64_t dim = c.dim, hid = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  std::vector<Entry> e;
  auto per_layer = [&](const char* name, std::vector<int64_t> shape) {
    for (int l = 0; l < c.n_layers; ++l) e.push_back({"blk." + std::to_string(l) + "." + name, shape});
  };
  auto weights = [&] {
    per_layer("attn_q.weight", {q, dim});
    per_layer("attn_k.weight", {kv, dim});
    per_layer("attn_v.weight", {kv, dim});
    per_layer("attn_output.weight", {dim, q});
  };
  if (v == Llama2cVersion::Legacy) {
    e.push_back({"token_embd.weight", {c.vocab_size, dim}});
    per_layer("attn_norm.weight", {dim});
    weights();
    per_layer("ffn_norm.weight", {dim});
    per_layer("ffn_gate.weight", {hid, dim});  // w1
    per_layer("ffn_down.weight", {dim, hid});  // w2
    per_layer("ffn_up.weight", {hid, dim});    // w3
    e.push_back({"output_norm.weight", {dim}});
    // freq_cis_real and freq_cis_imag: skipped, RoPE is computed at run time.
    e.push_back({"", {c.max_seq_len, c.head_dim / 2}});
    e.push_back({"", {c.max_seq_len, c.head_dim / 2}});
  } else {
    per_layer("attn_norm.weight", {dim});
    per_layer("ffn_norm.weight", {dim});
    e.push_back({"output_norm.weight", {dim}});
    e.push_back({"token_embd.weight", {c.vocab_size, dim}});
    weights();
    per_layer("ffn_gate.weight", {hid, dim});
    per_layer("ffn_down.weight", {dim, hid});
    per_layer("ffn_up.weight", {hid, dim});
  }
  if (!shared) e.push_back({"output.weight", {c.vocab_size, dim}});
  return e;
}

uint64_t entry_bytes(const Entry& e) {
  uint64_t n = 4;
  for (auto d : e.shape) n = checked_mul(n, static_cast<uint64_t>(d), "llama2.c tensor");
  return n;
}

void load_vocab(ModelFile& m, const OpenOptions& opts) {
  if (!opts.tokenizer_path.empty()) {
    m.vocab = load_tokenizer_file(opts.tokenizer_path, m.config.vocab_size, &m.chat_template);
    m.has_vocab = true;
    return;
  }
  const std::string dir = parent_dir(m.path);
  const std::string candidates[] = {join_path(dir, "tokenizer.bin"),
                                    join_path(dir, "tok" + std::to_string(m.config.vocab_size) + ".bin")};
  for (const auto& c : candidates) {
    if (file_exists(c)) {
      m.vocab = vocab_from_llama2c(c, m.config.vocab_size);
      m.has_vocab = true;
      return;
    }
  }
  if (opts.require_vocab)
    fail(m.path, ": no tokenizer found (looked for ", candidates[0], " and ", candidates[1],
         "; pass a tokenizer path)");
}

}  // namespace

bool looks_like_llama2c(const uint8_t* data, size_t size) {
  Header h = read_header(data, size);
  return plausible(h);
}

ModelFile open_llama2c(const std::string& path, const OpenOptions& opts) {
  auto mapping = MappedFile::open(path);
  Header h = read_header(mapping->data(), mapping->size());
  if (!plausible(h)) fail(path, ": not a recognised model file (no GGUF magic and no plausible llama2.c header)");
  if (h.version != 0 && h.version != 1)
    fail(path, ": llama2.c export version ", h.version, " is not supported (only the legacy and version 1 fp32 exports)");

  ModelFile m;
  m.path = path;
  m.format = "llama2c";
  m.file_size = mapping->size();
  m.mappings.push_back(mapping);
  ModelConfig& c = m.config;
  c.arch = Arch::Llama;
  c.rope_style = RopeStyle::Adjacent;
  c.dim = h.dim;
  c.hidden_dim = h.hidden_dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.vocab_size = h.vocab_size;
  c.max_seq_len = h.seq_len;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.tied_embeddings = h.shared;
  if (c.dim % c.n_heads != 0) fail(path, ": dim (", c.dim, ") is not a multiple of n_heads (", c.n_heads, ")");
  c.head_dim = c.dim / c.n_heads;
  validate_config(c, path);

  const auto version = h.version == 1 ? Llama2cVersion::V1 : Llama2cVersion::Legacy;
  const auto entries = layout(c, version, h.shared);
  uint64_t expected = h.version == 1 ? kHeaderV1 : kHeaderLegacy;
  for (const auto& e : entries) expected = checked_add(expected, entry_bytes(e), path);
  if (expected != mapping->size())
    fail(path, ": file is ", mapping->size(), " bytes but its llama2.c header (dim ", c.dim, ", hidden_dim ",
         c.hidden_dim, ", n_layers ", c.n_layers, ", vocab ", c.vocab_size, ", seq_len ", c.max_seq_len,
         ") implies ", expected, " bytes");

  uint64_t off = h.version == 1 ? kHeaderV1 : kHeaderLegacy;
  for (const auto& e : entries) {
    uint64_t n = entry_bytes(e);
    if (!e.name.empty()) {
      TensorView t;
      t.name = e.name;
      t.type = DType::F32;
      t.shape = e.shape;
      t.data = mapping->data() + off;
      t.nbytes = n;
      m.tensors.emplace(e.name, std::move(t));
    }
    off += n;
  }
  check_model_tensors(m);
  load_vocab(m, opts);
  add_model_info(m);
  m.info.emplace_back("llama2.c export", h.version == 1 ? "version 1" : "legacy");
  return m;
}

void write_llama2c(const std::string& path, const ModelConfig& c, const std::map<std::string, TensorView>& tensors,
                   Llama2cVersion version) {
  if (c.dim % c.n_heads != 0 || c.head_dim != c.dim / c.n_heads)
    fail(path, ": llama2.c needs head_dim == dim / n_heads");
  const bool shared = !tensors.count("output.weight");
  write_file_atomically(path, [&](std::ostream& out) {
    auto put_i32 = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    if (version == Llama2cVersion::V1) {
      put_i32(static_cast<int32_t>(kMagicV1));
      put_i32(1);
    }
    for (int32_t v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                      version == Llama2cVersion::Legacy && !shared ? -c.vocab_size : c.vocab_size, c.max_seq_len})
      put_i32(v);
    if (version == Llama2cVersion::V1) {
      out.put(shared ? 1 : 0);
      std::vector<char> pad(kHeaderV1 - 8 - 28 - 1, 0);
      out.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    }
    bool first_freq = true;
    for (const auto& e : layout(c, version, shared)) {
      if (e.name.empty()) {  // freq_cis tables as llama2.c's export computed them
        for (int64_t pos = 0; pos < e.shape[0]; ++pos)
          for (int64_t i = 0; i < e.shape[1]; ++i) {
            double freq = std::pow(10000.0, -2.0 * static_cast<double>(i) / c.head_dim);
            double a = static_cast<double>(pos) * freq;
            float v = static_cast<float>(first_freq ? std::cos(a) : std::sin(a));
            out.write(reinterpret_cast<const char*>(&v), 4);
          }
        first_freq = false;
        continue;
      }
      auto it = tensors.find(e.name);
      if (it == tensors.end()) fail(path, ": tensor '", e.name, "' is missing");
      const TensorView& t = it->second;
      if (t.type != DType::F32 || t.shape != e.shape)
        fail(path, ": tensor '", e.name, "' must be F32 ", shape_string(e.shape), ", got ", dtype_name(t.type), " ",
             shape_string(t.shape));
      out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(entry_bytes(e)));
    }
  });
}

}  // namespace pocket
