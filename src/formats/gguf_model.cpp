// GGUF / Pocket file -> ModelFile: config from `<arch>.*` keys, tensors,
// tokenizer.
#include <cmath>
#include <limits>

#include "formats/external_vocab.h"
#include "formats/gguf.h"
#include "formats/gguf_vocab.h"
#include "formats/gguf_writer.h"
#include "formats/model_checks.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket {

namespace {

Arch arch_from_gguf(const GgufFile& g, std::string* name) {
  auto a = g.get_string("general.architecture");
  if (!a) fail(g.path(), ": metadata 'general.architecture' is missing");
  *name = std::string(*a);
  if (*a == "llama") return Arch::Llama;
  if (*a == "qwen2") return Arch::Qwen2;
  if (*a == "qwen3") return Arch::Qwen3;
  if (*a == "gemma3") return Arch::Gemma3;
  fail(g.path(), ": unsupported architecture '", *a, "' (supported: llama, qwen2, qwen3, gemma3)");
}

// Integer hyper-parameter that must fit an int (validate_config checks ranges).
int int_key(const GgufFile& g, const std::string& key, std::optional<int> dflt) {
  auto v = g.get_int(key);
  if (!v) {
    if (!dflt) fail(g.path(), ": required metadata '", key, "' is missing");
    return *dflt;
  }
  if (*v < 0 || *v > std::numeric_limits<int>::max()) fail(g.path(), ": metadata '", key, "' = ", *v, " is out of range");
  return static_cast<int>(*v);
}

float float_key(const GgufFile& g, const std::string& key, float dflt) {
  auto v = g.get_float(key);
  if (!v) return dflt;
  // Converting a double outside float's range is undefined: refuse it here.
  if (!(std::fabs(*v) <= std::numeric_limits<float>::max()))
    fail(g.path(), ": metadata '", key, "' = ", *v, " is out of range");
  return static_cast<float>(*v);
}

ModelConfig config_from_gguf(const GgufFile& g, const ModelFile& m) {
  ModelConfig c;
  std::string a;
  c.arch = arch_from_gguf(g, &a);
  c.rope_style = c.arch == Arch::Llama ? RopeStyle::Adjacent : RopeStyle::Halves;  // GGUF llama q/k are permuted
  c.dim = int_key(g, a + ".embedding_length", std::nullopt);
  c.hidden_dim = int_key(g, a + ".feed_forward_length", std::nullopt);
  c.n_layers = int_key(g, a + ".block_count", std::nullopt);
  c.n_heads = int_key(g, a + ".attention.head_count", std::nullopt);
  c.n_kv_heads = int_key(g, a + ".attention.head_count_kv", c.n_heads);
  if (!g.has(a + ".attention.key_length")) {
    if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
      fail(g.path(), ": ", a, ".embedding_length (", c.dim, ") is not a multiple of ", a,
           ".attention.head_count (", c.n_heads, ") and no key_length is given");
  }
  c.head_dim = int_key(g, a + ".attention.key_length", c.n_heads > 0 ? c.dim / c.n_heads : 0);
  if (int vl = int_key(g, a + ".attention.value_length", c.head_dim); vl != c.head_dim)
    fail(g.path(), ": ", a, ".attention.value_length (", vl, ") differs from key_length (", c.head_dim, ")");
  c.max_seq_len = int_key(g, a + ".context_length", std::nullopt);
  c.rope_theta = float_key(g, a + ".rope.freq_base", 10000.0f);
  c.norm_eps = float_key(g, a + ".attention.layer_norm_rms_epsilon", 1e-5f);

  if (c.arch == Arch::Gemma3) {
    apply_arch_defaults(c);
    // Without a window every layer is global (llama.cpp: no sliding window).
    c.sliding_window = int_key(g, a + ".attention.sliding_window", 0);
    c.swa_pattern = int_key(g, a + ".attention.sliding_window_pattern", 6);  // one integer; per-layer arrays fail here
    c.rope_theta_local = float_key(g, a + ".rope.freq_base_swa", 10000.0f);
    c.final_softcap = float_key(g, a + ".final_logit_softcapping", 0.0f);
    if (g.has(a + ".rope.scaling.type") || g.has(a + ".rope.scaling.factor"))
      fail(g.path(), ": ", a, ": RoPE scaling (", a, ".rope.scaling.*) is not supported");
  }

  const TensorView* emb = m.find("token_embd.weight");
  if (!emb) fail(g.path(), ": required tensor 'token_embd.weight' is missing");
  c.vocab_size = int_key(g, a + ".vocab_size", static_cast<int>(std::min<int64_t>(emb->rows(), INT32_MAX)));
  return c;
}

std::shared_ptr<const Tokenizer> pocket_tokenizer(const GgufFile& g) {
  auto [data, size] = g.get_byte_array("pocket.tokenizer");
  try {
    return Tokenizer::deserialize(data, static_cast<size_t>(size));
  } catch (const Error& e) {
    fail(g.path(), ": pocket.tokenizer: ", e.what());
  }
}

}  // namespace

ModelFile open_gguf(const std::string& path, const OpenOptions& opts) {
  auto mapping = MappedFile::open(path);
  GgufFile g = GgufFile::parse(mapping);
  ModelFile m;
  m.path = path;
  m.file_size = mapping->size();
  m.mappings.push_back(mapping);

  const bool pocket = g.has("pocket.version");
  m.format = pocket ? "pocket" : "gguf";
  if (pocket) {
    auto ver = g.get_int("pocket.version");
    if (*ver < 1 || *ver > kPocketFileVersion)
      fail(path, ": pocket.version = ", *ver, " is not supported (this build reads version 1..", kPocketFileVersion,
           ")");
  }

  for (const auto& t : g.tensors()) m.tensors.emplace(t.name, g.view(t));

  m.config = config_from_gguf(g, m);
  infer_tensor_flags(m);
  validate_config(m.config, path);
  check_model_tensors(m);

  if (auto tmpl = g.get_string("tokenizer.chat_template")) m.chat_template = std::string(*tmpl);
  if (!opts.tokenizer_path.empty()) {
    m.vocab = load_tokenizer_file(opts.tokenizer_path, m.config.vocab_size, &m.chat_template);
    m.has_vocab = true;
  } else if (pocket && g.has("pocket.tokenizer")) {
    m.tokenizer = pocket_tokenizer(g);
    m.vocab = m.tokenizer->vocab();
    m.has_vocab = true;
  } else if (g.has("tokenizer.ggml.model")) {
    m.vocab = vocab_from_gguf(g, &m.notes);
    m.has_vocab = true;
  } else if (opts.require_vocab) {
    fail(path, ": no tokenizer in the file (neither ", pocket ? "pocket.tokenizer nor " : "",
         "tokenizer.ggml.model) and no tokenizer file given");
  }
  if (m.has_vocab && m.vocab.tokens.size() > static_cast<size_t>(m.config.vocab_size))
    fail(path, ": tokenizer has ", m.vocab.tokens.size(), " tokens but the model's vocab_size is ", m.config.vocab_size);

  add_model_info(m);
  if (pocket) m.info.insert(m.info.begin() + 1, {"pocket version", std::to_string(*g.get_int("pocket.version"))});
  if (g.pq_group() != 0) m.info.emplace_back("quant group size", std::to_string(g.pq_group()));
  m.info.emplace_back("gguf version", std::to_string(g.version()));
  return m;
}

}  // namespace pocket
