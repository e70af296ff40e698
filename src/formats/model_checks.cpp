#include "formats/model_checks.h"

#include <map>
#include <sstream>

#include "core/tensor_specs.h"
#include "util/error.h"

namespace pocket {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '{';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << '}';
  return os.str();
}

void infer_tensor_flags(ModelFile& m) {
  m.config.tied_embeddings = m.find("output.weight") == nullptr;
  m.config.qkv_bias = m.find("blk.0.attn_q.bias") != nullptr;
  m.config.qk_norm = m.find("blk.0.attn_q_norm.weight") != nullptr;
}

void check_model_tensors(const ModelFile& m) {
  const ModelConfig& c = m.config;
  auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
    const TensorView* t = m.find(name);
    if (!t) fail(m.path, ": required tensor '", name, "' is missing");
    if (t->shape != shape)
      fail(m.path, ": tensor '", name, "' has shape ", shape_string(t->shape), ", expected ", shape_string(shape));
  };
  for (const TensorSpec& t : model_tensor_specs(c))
    expect(t.name, t.shape());
}

namespace {

std::string tokenizer_summary(const ModelFile& m) {
  if (!m.has_vocab) return "none";
  const Vocab& v = m.vocab;
  std::ostringstream os;
  if (v.kind == TokenizerKind::ByteLevelBPE) {
    os << "byte-level BPE, " << v.tokens.size() << " tokens, " << v.merges.size() << " merges";
  } else {
    os << "SentencePiece BPE, " << v.tokens.size() << " tokens";
  }
  return os.str();
}

std::string human_bytes(uint64_t n) {
  std::ostringstream os;
  os.precision(3);
  if (n >= (uint64_t{1} << 30)) {
    os << static_cast<double>(n) / (1 << 30) << " GiB";
  } else if (n >= (1 << 20)) {
    os << static_cast<double>(n) / (1 << 20) << " MiB";
  } else if (n >= (1 << 10)) {
    os << static_cast<double>(n) / (1 << 10) << " KiB";
  } else {
    return std::to_string(n) + " B";
  }
  return os.str() + " (" + std::to_string(n) + " bytes)";
}

}  // namespace

void add_model_info(ModelFile& m) {
  const ModelConfig& c = m.config;
  auto add = [&](std::string k, std::string v) { m.info.emplace_back(std::move(k), std::move(v)); };
  auto num = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  add("format", m.format);
  add("architecture", arch_name(c.arch));
  add("hidden size", std::to_string(c.dim));
  add("FFN size", std::to_string(c.hidden_dim));
  add("layers", std::to_string(c.n_layers));
  add("heads", std::to_string(c.n_heads) + " query, " + std::to_string(c.n_kv_heads) + " key/value");
  add("head dim", std::to_string(c.head_dim));
  add("vocab size", std::to_string(c.vocab_size));
  add("context length", std::to_string(c.max_seq_len));
  add("rope theta", num(c.rope_theta));
  add("rope style", c.rope_style == RopeStyle::Halves ? "halves (NeoX)" : "adjacent pairs");
  add("norm eps", num(c.norm_eps));
  add("tied embeddings", c.tied_embeddings ? "yes" : "no");
  if (c.qkv_bias) add("qkv bias", "yes");
  if (c.qk_norm) add("q/k norm", "yes");
  if (c.ffn_act == Activation::GeluTanh) add("FFN activation", "GeGLU (tanh GELU)");
  if (c.embed_scale != 1.0f) add("embedding scale", num(c.embed_scale));
  if (c.post_norms) add("post-norms", "attention and FFN outputs");
  if (c.sliding_window > 0) {
    int local = 0;
    for (int l = 0; l < c.n_layers; ++l) local += c.is_local(l);
    add("sliding window", std::to_string(c.sliding_window) + " positions on " + std::to_string(local) + " of " +
                              std::to_string(c.n_layers) + " layers (rope theta " + num(c.rope_theta_local) + ")");
  }
  if (c.final_softcap > 0.0f) add("final logit soft-cap", num(c.final_softcap));

  uint64_t params = 0;
  std::map<std::string, int> types;
  for (const auto& [name, t] : m.tensors) {
    params += static_cast<uint64_t>(t.numel());
    ++types[std::string(dtype_name(t.type))];
  }
  std::ostringstream ps;
  ps.precision(4);
  ps << static_cast<double>(params) / 1e6 << " M (" << params << ")";
  add("parameters", ps.str());
  std::string ts;
  for (const auto& [name, n] : types) ts += (ts.empty() ? "" : ", ") + name + " x " + std::to_string(n);
  add("tensor types", ts);
  add("file size", human_bytes(m.file_size));
  add("tokenizer", tokenizer_summary(m));
  if (!m.chat_template.empty()) add("chat template", std::to_string(m.chat_template.size()) + " characters");
}

}  // namespace pocket
