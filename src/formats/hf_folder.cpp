#include "formats/hf_folder.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/external_vocab.h"
#include "formats/model_checks.h"
#include "formats/safetensors.h"
#include "tokenizer/hf_json.h"
#include "util/error.h"

namespace pocket {

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::string text = read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

// Integer field of config.json; null counts as absent.
int config_int(const json& j, const std::string& src, const char* key, std::optional<int> dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!dflt) fail(src, ": required field '", key, "' is missing");
    return *dflt;
  }
  if (!it->is_number_integer()) fail(src, ": field '", key, "' is not an integer");
  int64_t v = it->get<int64_t>();
  if (v < 0 || v > std::numeric_limits<int>::max()) fail(src, ": field '", key, "' = ", v, " is out of range");
  return static_cast<int>(v);
}

float config_float(const json& j, const std::string& src, const char* key, float dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number()) fail(src, ": field '", key, "' is not a number");
  double v = it->get<double>();
  // Converting a double outside float's range is undefined: refuse it here.
  if (!(std::fabs(v) <= std::numeric_limits<float>::max())) fail(src, ": field '", key, "' = ", v, " is out of range");
  return static_cast<float>(v);
}

Arch arch_from_config(const json& j, const std::string& src) {
  auto archs = j.find("architectures");
  if (archs != j.end() && archs->is_array()) {
    for (const auto& a : *archs) {
      if (!a.is_string()) continue;
      const std::string s = a.get<std::string>();
      if (s == "LlamaForCausalLM") return Arch::Llama;
      if (s == "Qwen2ForCausalLM") return Arch::Qwen2;
      if (s == "Qwen3ForCausalLM") return Arch::Qwen3;
    }
    fail(src, ": unsupported architectures ", archs->dump(),
         " (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
  }
  fail(src, ": field 'architectures' is missing");
}

ModelConfig config_from_json(const json& j, const std::string& src, bool* tie) {
  if (!j.is_object()) fail(src, ": not a JSON object");
  ModelConfig c;
  c.arch = arch_from_config(j, src);
  c.rope_style = RopeStyle::Halves;
  c.dim = config_int(j, src, "hidden_size", std::nullopt);
  c.hidden_dim = config_int(j, src, "intermediate_size", std::nullopt);
  c.n_layers = config_int(j, src, "num_hidden_layers", std::nullopt);
  c.n_heads = config_int(j, src, "num_attention_heads", std::nullopt);
  c.n_kv_heads = config_int(j, src, "num_key_value_heads", c.n_heads);
  auto hd = j.find("head_dim");
  if ((hd == j.end() || hd->is_null()) && (c.n_heads == 0 || c.dim % c.n_heads != 0))
    fail(src, ": hidden_size (", c.dim, ") is not a multiple of num_attention_heads (", c.n_heads,
         ") and no head_dim is given");
  c.head_dim = config_int(j, src, "head_dim", c.n_heads ? c.dim / c.n_heads : 0);
  c.max_seq_len = config_int(j, src, "max_position_embeddings", 2048);
  c.vocab_size = config_int(j, src, "vocab_size", std::nullopt);
  c.rope_theta = config_float(j, src, "rope_theta", 10000.0f);
  c.norm_eps = config_float(j, src, "rms_norm_eps", 1e-6f);
  auto t = j.find("tie_word_embeddings");
  if (t != j.end() && !t->is_null() && !t->is_boolean()) fail(src, ": field 'tie_word_embeddings' is not a boolean");
  *tie = t != j.end() && t->is_boolean() && t->get<bool>();
  return c;
}

// Shard file names come from the index: refuse anything that leaves the folder.
void check_shard_name(const std::string& name, const std::string& src) {
  if (name.empty() || name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
      name == "..")
    fail(src, ": weight_map names the file '", name, "', which is not a plain file name in the folder");
}

// Safetensors shards of the folder, keyed by file name, and which tensor
// lives in which shard (empty when there is a single model.safetensors).
struct Shards {
  std::map<std::string, SafetensorsFile> files;
  std::map<std::string, std::string> weight_map;
};

Shards open_shards(const std::string& dir) {
  Shards s;
  const std::string index = join_path(dir, "model.safetensors.index.json");
  if (file_exists(index)) {
    json j = read_json(index);
    auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (wm == j.end() || !wm->is_object()) fail(index, ": 'weight_map' is missing or not an object");
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string()) fail(index, ": weight_map entry '", tensor, "' is not a file name");
      std::string name = file.get<std::string>();
      check_shard_name(name, index);
      s.weight_map[tensor] = name;
      if (!s.files.count(name)) s.files.emplace(name, SafetensorsFile::open(join_path(dir, name)));
    }
    for (const auto& [tensor, file] : s.weight_map)
      if (!s.files.at(file).tensors().count(tensor))
        fail(join_path(dir, file), ": tensor '", tensor, "' listed in model.safetensors.index.json is not in this file");
    return s;
  }
  const std::string single = join_path(dir, "model.safetensors");
  if (!file_exists(single))
    fail(dir, ": no weights found (looked for model.safetensors.index.json and model.safetensors)");
  s.files.emplace("model.safetensors", SafetensorsFile::open(single));
  return s;
}

// Views whose data is misaligned for their element type are copied into an
// owned, aligned buffer so kernels can load them directly.
TensorView aligned_view(TensorView t, ModelFile& m) {
  size_t align = static_cast<size_t>(dtype_block_bytes(t.type));
  if (reinterpret_cast<uintptr_t>(t.data) % align == 0) return t;
  auto buf = std::make_shared<std::vector<uint8_t>>(t.nbytes);  // nbytes was checked against the file
  std::memcpy(buf->data(), t.data, t.nbytes);
  t.data = buf->data();
  m.buffers.push_back(std::move(buf));
  return t;
}

void load_vocab(ModelFile& m, const std::string& dir, const OpenOptions& opts) {
  if (!opts.tokenizer_path.empty()) {
    m.vocab = load_tokenizer_file(opts.tokenizer_path, m.config.vocab_size, &m.chat_template);
    m.has_vocab = true;
    return;
  }
  const std::string tj = join_path(dir, "tokenizer.json");
  const std::string tc = join_path(dir, "tokenizer_config.json");
  if (!file_exists(tj)) {
    if (opts.require_vocab) fail(dir, ": no tokenizer found (looked for ", tj, ")");
    return;
  }
  m.vocab = vocab_from_hf_json(tj, file_exists(tc) ? tc : "", &m.chat_template);
  m.has_vocab = true;
}

// Hugging Face Llama/Qwen tensor names and their canonical (GGUF) names.
const std::map<std::string, std::string> kTop = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
const std::map<std::string, std::string> kLayer = {
    {"self_attn.q_proj.weight", "attn_q.weight"},     {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},     {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},     {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},          {"mlp.down_proj.weight", "ffn_down.weight"},
};

}  // namespace

std::string canonical_hf_name(const std::string& n) {
  if (auto it = kTop.find(n); it != kTop.end()) return it->second;
  static constexpr std::string_view kPrefix = "model.layers.";
  if (n.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  const char* p = n.data() + kPrefix.size();
  const char* end = n.data() + n.size();
  unsigned layer = 0;
  auto [q, ec] = std::from_chars(p, end, layer);
  if (ec != std::errc() || q == p || q == end || *q != '.' || (*p == '0' && q - p > 1)) return "";
  auto it = kLayer.find(std::string(q + 1, end));
  if (it == kLayer.end()) return "";
  return "blk." + std::to_string(layer) + "." + it->second;
}

std::string hf_tensor_name(const std::string& canonical) {
  for (const auto& [hf, canon] : kTop)
    if (canon == canonical) return hf;
  static constexpr std::string_view kBlk = "blk.";
  if (canonical.compare(0, kBlk.size(), kBlk) != 0) return "";
  const size_t dot = canonical.find('.', kBlk.size());
  if (dot == std::string::npos) return "";
  const std::string rest = canonical.substr(dot + 1);
  for (const auto& [hf, canon] : kLayer)
    if (canon == rest) return "model.layers." + canonical.substr(kBlk.size(), dot - kBlk.size()) + "." + hf;
  return "";
}

ModelFile open_hf_folder(const std::string& dir, const OpenOptions& opts) {
  ModelFile m;
  m.path = dir;
  m.format = "hf";
  const std::string cfg_path = join_path(dir, "config.json");
  if (!file_exists(cfg_path)) fail(dir, ": not a Hugging Face model folder (no config.json)");
  bool tie = false;
  m.config = config_from_json(read_json(cfg_path), cfg_path, &tie);

  Shards shards = open_shards(dir);
  for (const auto& [file, st] : shards.files) {
    m.mappings.push_back(st.mapping());
    m.file_size += st.mapping()->size();
    for (const auto& [name, view] : st.tensors()) {
      // With an index, a tensor counts only in the shard the index names.
      if (!shards.weight_map.empty()) {
        auto w = shards.weight_map.find(name);
        if (w == shards.weight_map.end() || w->second != file) continue;
      }
      std::string canon = canonical_hf_name(name);
      TensorView t = aligned_view(view, m);
      t.name = canon.empty() ? name : canon;
      if (!m.tensors.emplace(t.name, t).second) fail(st.path(), ": tensor '", name, "' appears twice");
    }
  }
  if (tie) m.tensors.erase("output.weight");  // HF ties the head to the embedding whatever lm_head holds
  infer_tensor_flags(m);
  validate_config(m.config, cfg_path);
  check_model_tensors(m);

  load_vocab(m, dir, opts);
  if (m.has_vocab && m.vocab.tokens.size() > static_cast<size_t>(m.config.vocab_size))
    fail(dir, ": tokenizer has ", m.vocab.tokens.size(), " tokens but config.json vocab_size is ", m.config.vocab_size);
  add_model_info(m);
  m.info.emplace_back("weight files", std::to_string(shards.files.size()));
  return m;
}

}  // namespace pocket
