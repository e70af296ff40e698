#include "model/synthetic.h"

#include <cmath>
#include <cstring>

#include "core/tensor_specs.h"
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
  if (name == "gemma3-270m") {  // Gemma 3 270M's shapes (tests use its real weights when present)
    ModelConfig c = base(Arch::Gemma3, 640, 2048, 18, 4, 1, 256, 262144, 32768, 1e6f);
    c.qk_norm = true;
    c.sliding_window = 512;
    c.swa_pattern = 6;
    apply_arch_defaults(c);
    return c;
  }
  if (name == "tiny-gemma3") {  // a window of 8 on layers 0 and 2, so short tests cross it
    ModelConfig c = base(Arch::Gemma3, 64, 160, 4, 4, 1, 32, 300, 1024, 1e6f);
    c.qk_norm = true;
    c.sliding_window = 8;
    c.swa_pattern = 2;
    apply_arch_defaults(c);
    return c;
  }
  fail("unknown preset '", name,
       "' (known: pocket-0.3b, qwen3-0.6b, gemma3-270m, tiny-llama, tiny-qwen2, tiny-qwen3, tiny-gemma3)");
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
  auto add = [&](const TensorSpec& spec_t, DType type) {
    const std::string& name = spec_t.name;
    const int64_t rows = spec_t.rows, cols = spec_t.cols;
    auto values = synthetic_tensor(name, rows, cols, spec.seed);
    auto buf = std::make_shared<std::vector<uint8_t>>(quantize(values.data(), rows, cols, type, spec.group));
    TensorView t;
    t.name = name;
    t.type = type;
    t.shape = spec_t.shape();
    t.data = buf->data();
    t.nbytes = buf->size();
    t.group = is_pq(type) ? spec.group : 0;
    f.file_size += buf->size();
    f.buffers.push_back(std::move(buf));
    f.tensors[name] = t;
  };
  for (const TensorSpec& t : model_tensor_specs(c)) {
    const DType type = t.vector                      ? DType::F32
                       : t.name == "token_embd.weight" ? spec.embed_type
                       : t.name == "output.weight"     ? spec.head_type
                                                       : spec.weight_type;
    add(t, type);
  }
  return f;
}

}  // namespace pocket
