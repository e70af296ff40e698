#include "speculative/dflash_gguf.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "util/error.h"

namespace pocket {

namespace {

using json = nlohmann::json;

// llama.cpp's tensor names (blk.N. prefix stripped) and z-lab's.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"attn_conv_base", "attention_conv.base_kernel"},
    {"attn_conv_proj.weight", "attention_conv.kernel_projection.weight"},
    {"ffn_conv_base", "mlp_conv.base_kernel"},
    {"ffn_conv_proj.weight", "mlp_conv.kernel_projection.weight"},
};
constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"fc.weight", "fc.weight"},
    {"enc.output_norm.weight", "hidden_norm.weight"},
    {"output_norm.weight", "norm.weight"},
    {"selector_predecessor.weight", "candidate_selector.predecessor_codebook"},
    {"selector_successor.weight", "candidate_selector.successor_codebook"},
    {"selector_hidden.weight", "candidate_selector.hidden_projection.weight"},
};

std::string zlab_name(const std::string& name) {
  for (const auto& [from, to] : kGlobalNames)
    if (name == from) return to;
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string::npos && dot > 4 && name.find_first_not_of("0123456789", 4) == dot) {
      const std::string rest = name.substr(dot + 1);
      for (const auto& [from, to] : kLayerNames)
        if (rest == from) return "layers." + name.substr(4, dot - 4) + "." + to;
    }
  }
  return name;  // unknown: DFlashDraft refuses it by this name
}

}  // namespace

void read_llama_dflash_gguf(const GgufFile& g, DFlashDraftFile& f) {
  const std::string& path = g.path();
  auto need = [&](const std::string& key) {
    const auto v = g.get_int(key);
    if (!v) fail(path, ": GGUF DFlash draft has no ", key);
    return *v;
  };
  json j;
  j["architectures"] = json::array({"DFlashDraftModel"});
  j["hidden_size"] = need("dflash.embedding_length");
  j["intermediate_size"] = need("dflash.feed_forward_length");
  j["num_hidden_layers"] = need("dflash.block_count");
  j["num_attention_heads"] = need("dflash.attention.head_count");
  j["num_key_value_heads"] = need("dflash.attention.head_count_kv");
  j["block_size"] = need("dflash.block_size");
  if (const auto hd = g.get_int("dflash.attention.key_length")) {
    if (g.get_int("dflash.attention.value_length").value_or(*hd) != *hd)
      fail(path, ": dflash.attention.value_length differs from key_length, which Pocket's DFlash drafts do not support");
    j["head_dim"] = *hd;
  }
  if (const auto eps = g.get_float("dflash.attention.layer_norm_rms_epsilon")) j["rms_norm_eps"] = *eps;
  if (const auto theta = g.get_float("dflash.rope.freq_base")) j["rope_theta"] = *theta;
  // Settings Pocket's drafts would otherwise ignore and get wrong.
  for (const char* key : {"dflash.attention.sliding_window", "dflash.attention.value_scale", "dflash.rope.scaling.factor",
                          "dflash.rope.dimension_sections", "dflash.hyper_connection_count"})
    if (g.has(key)) fail(path, ": ", key, " is set, which Pocket's DFlash drafts do not support");
  if (g.get_bool("dflash.attention.causal").value_or(false))
    fail(path, ": dflash.attention.causal is set: Pocket's DFlash drafts attend over the whole block");
  if (const auto act = g.get_string("dflash.hidden_act"); act && *act != "silu")
    fail(path, ": dflash.hidden_act \"", std::string(*act), "\" is not supported (only silu)");
  if (const auto rot = g.get_int("dflash.rope.dimension_count"); rot && j.contains("head_dim") && *rot != j["head_dim"].get<int64_t>())
    fail(path, ": dflash.rope.dimension_count ", *rot, " (partial rotary) is not supported");

  json d;
  d["mask_token_id"] = need("tokenizer.ggml.mask_token_id");
  json ids = json::array();
  for (int64_t id : g.get_int_array("dflash.target_layers", true)) {
    if (id < 1) fail(path, ": dflash.target_layers holds ", id, "; its ids count target layers from 1");
    ids.push_back(id - 1);
  }
  d["target_layer_ids"] = ids;
  for (const auto& [key, name] : {std::pair{"dflash.conv_kernel_size", "conv_kernel_size"},
                                  std::pair{"dflash.conv_group_size", "conv_group_size"},
                                  std::pair{"dflash.selector_rank", "selector_rank"},
                                  std::pair{"dflash.selector_top_k", "selector_top_k"}})
    if (const auto v = g.get_int(key)) d[name] = *v;
  if (const auto v = g.get_float("dflash.logit_scale")) d["output_multiplier"] = *v;
  if (const auto v = g.get_float("dflash.final_logit_softcapping")) d["final_logit_softcapping"] = *v;
  if (const auto v = g.get_float("dflash.embedding_scale")) d["input_embedding_scale"] = *v;
  j["dflash_config"] = d;
  f.config_json = j.dump();

  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.name == "token_embd.weight" || t.name == "output.weight" || t.name == "d2t")
      fail(path, ": the draft carries its own ", t.name,
           "; Pocket's DFlash drafts use the target's embedding, output head and vocabulary");
    if (!f.tensors.emplace(zlab_name(t.name), g.view(t)).second)
      fail(path, ": tensor ", t.name, " appears twice (under llama.cpp's and z-lab's name)");
  }
}

}  // namespace pocket
