#include "model/synthetic.h"

#include <cmath>
#include <cstring>

#include "quant/quantize.h"
#include "util/error.h"

namespace pocket {

namespace {

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

ModelConfig base(Arch arch, int dim, int hidden, int layers, int heads, int kv_heads, int head_dim, int vocab,
                 int ctx, float theta) {
  ModelConfig c;
  c.arch = arch;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.vocab_size = vocab;
  c.max_seq_len = ctx;
  c.rope_theta = theta;
  c.norm_eps = 1e-6f;
  c.rope_style = RopeStyle::Halves;
  c.tied_embeddings = true;
  c.qkv_bias = arch == Arch::Qwen2;
  c.qk_norm = arch == Arch::Qwen3;
  return c;
}

}  // namespace

ModelConfig preset_config(const std::string& name) {
  if (name == "pocket-0.3b") return base(Arch::Qwen3, 1024, 3072, 15, 16, 8, 128, 64000, 32768, 1e6f);
  if (name == "qwen3-0.6b") return base(Arch::Qwen3, 1024, 3072, 28, 16, 8, 128, 151936, 40960, 1e6f);
  if (name == "tiny-qwen3") return base(Arch::Qwen3, 64, 160, 2, 4, 2, 32, 300, 256, 1e6f);
  if (name == "tiny-qwen2") {
    ModelConfig c = base(Arch::Qwen2, 64, 160, 2, 4, 2, 16, 300, 256, 1e6f);
    c.tied_embeddings = false;
    return c;
  }
  if (name == "tiny-llama") {
    ModelConfig c = base(Arch::Llama, 48, 128, 2, 6, 3, 8, 300, 256, 10000.0f);
    c.rope_style = RopeStyle::Adjacent;
    c.tied_embeddings = false;
    c.norm_eps = 1e-5f;
    return c;
  }
  fail("unknown preset '", name, "' (known: pocket-0.3b, qwen3-0.6b, tiny-llama, tiny-qwen2, tiny-qwen3)");
}

std::vector<float> synthetic_tensor(const std::string& name, int64_t rows, int64_t cols, uint64_t seed) {
  uint64_t s = hash_name(name, seed) | 1;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  bool is_norm = name.find("norm") != std::string::npos;
  bool is_bias = name.find(".bias") != std::string::npos;
  // Uniform in [-a, a] with a = sqrt(3 / cols) keeps unit variance through a
  // matrix; norm weights sit around 1.
  float a = is_norm ? 0.1f : is_bias ? 0.1f : std::sqrt(3.0f / static_cast<float>(cols));
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    float u = static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
    x = (is_norm ? 1.0f : 0.0f) + a * u;
  }
  return v;
}

ModelFile make_synthetic_model(const SyntheticSpec& spec) {
  const ModelConfig& c = spec.config;
  validate_config(c, "synthetic model");
  ModelFile f;
  f.path = "synthetic:" + arch_name(c.arch);
  f.format = "synthetic";
  f.config = c;
  auto add = [&](const std::string& name, int64_t rows, int64_t cols, DType type) {
    auto values = synthetic_tensor(name, rows, cols, spec.seed);
    auto buf = std::make_shared<std::vector<uint8_t>>(quantize(values.data(), rows, cols, type, spec.group));
    TensorView t;
    t.name = name;
    t.type = type;
    t.shape = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
    t.data = buf->data();
    t.nbytes = buf->size();
    t.group = (type == DType::PQ4 || type == DType::PQ8) ? spec.group : 0;
    f.file_size += buf->size();
    f.buffers.push_back(std::move(buf));
    f.tensors[name] = t;
  };
  add("token_embd.weight", c.vocab_size, c.dim, spec.embed_type);
  add("output_norm.weight", 1, c.dim, DType::F32);
  if (!c.tied_embeddings) add("output.weight", c.vocab_size, c.dim, spec.head_type);
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1, c.dim, DType::F32);
    add(p + "attn_q.weight", c.q_dim(), c.dim, spec.weight_type);
    add(p + "attn_k.weight", c.kv_dim(), c.dim, spec.weight_type);
    add(p + "attn_v.weight", c.kv_dim(), c.dim, spec.weight_type);
    add(p + "attn_output.weight", c.dim, c.q_dim(), spec.weight_type);
    if (c.qkv_bias) {
      add(p + "attn_q.bias", 1, c.q_dim(), DType::F32);
      add(p + "attn_k.bias", 1, c.kv_dim(), DType::F32);
      add(p + "attn_v.bias", 1, c.kv_dim(), DType::F32);
    }
    if (c.qk_norm) {
      add(p + "attn_q_norm.weight", 1, c.head_dim, DType::F32);
      add(p + "attn_k_norm.weight", 1, c.head_dim, DType::F32);
    }
    add(p + "ffn_norm.weight", 1, c.dim, DType::F32);
    add(p + "ffn_gate.weight", c.hidden_dim, c.dim, spec.weight_type);
    add(p + "ffn_up.weight", c.hidden_dim, c.dim, spec.weight_type);
    add(p + "ffn_down.weight", c.dim, c.hidden_dim, spec.weight_type);
  }
  return f;
}

}  // namespace pocket
