// Shared by the DFlash tests: a tiny random-weight Qwen3 target (f32) and
// random DFlash and DFlash2 drafts for it written in z-lab's folder layout
// or as llama.cpp's GGUF form.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "convert/create_model.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "runtime/loader.h"

namespace pocket::test {

// The target: tiny-qwen3 (64 wide, 2 layers, vocab 300) with f32 weights,
// so the reference reads exactly the weights the kernels use.
inline const LoadedModel& dflash_target() {
  static TempDir dir;
  static LoadedModel m = [] {
    convert::CreateOptions co;
    co.preset = "tiny-qwen3";
    co.weights = DType::F32;
    convert::create_model(co, dir.file("t.gguf"));
    return load_model(dir.file("t.gguf"));
  }();
  return m;
}

// A random DFlash draft in z-lab's layout: 2 layers, 4 query / 2 KV heads of
// 16, FFN 96, block 5, taps after target layers 0 and 1 (1 is the last:
// the format's hidden state there is after the final norm).
struct Draft {
  int layers = 2, heads = 4, kv_heads = 2, hd = 16, ffn = 96, block = 5, mask = 299;
  std::vector<int> taps = {0, 1};
  // DFlash2 when conv_kernel > 0: conv taps and channels per group, the
  // selector's rank and top-k over the target's `vocab` tokens.
  int conv_kernel = 0, conv_group = 0, sel_rank = 0, sel_top_k = 0, vocab = 300;
  float output_multiplier = 1.0f, softcap = 0.0f;  // written to the config when not 1 / 0
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> w;

  explicit Draft(int H, uint64_t seed = 7) { randomize(H, seed); }
  // For another shape: default-construct, set the shape fields, randomize.
  Draft() = default;

  // Draws every tensor of the current shape for hidden size H.
  void randomize(int H, uint64_t seed) {
    w.clear();
    std::mt19937_64 rng(seed);
    auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
      int64_t n = 1;
      for (auto d : shape) n *= d;
      std::uniform_real_distribution<float> u(-scale, scale);
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = offset + u(rng);
      w[name] = {shape, v};
    };
    const int64_t q = int64_t{heads} * hd, kv = int64_t{kv_heads} * hd;
    add("fc.weight", {H, H * static_cast<int64_t>(taps.size())}, 0.15f);
    add("hidden_norm.weight", {H}, 0.2f, 1.0f);
    add("norm.weight", {H}, 0.2f, 1.0f);
    for (int l = 0; l < layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      add(p + "self_attn.q_proj.weight", {q, H}, 0.3f);
      add(p + "self_attn.k_proj.weight", {kv, H}, 0.3f);
      add(p + "self_attn.v_proj.weight", {kv, H}, 0.2f);
      add(p + "self_attn.o_proj.weight", {H, q}, 0.2f);
      add(p + "mlp.gate_proj.weight", {ffn, H}, 0.2f);
      add(p + "mlp.up_proj.weight", {ffn, H}, 0.2f);
      add(p + "mlp.down_proj.weight", {H, ffn}, 0.15f);
      add(p + "input_layernorm.weight", {H}, 0.2f, 1.0f);
      add(p + "post_attention_layernorm.weight", {H}, 0.2f, 1.0f);
      add(p + "self_attn.q_norm.weight", {hd}, 0.2f, 1.0f);
      add(p + "self_attn.k_norm.weight", {hd}, 0.2f, 1.0f);
      if (conv_kernel > 0)
        for (const char* conv : {"attention_conv.", "mlp_conv."}) {
          add(p + conv + "base_kernel", {2, conv_kernel, H}, 0.5f, 0.3f);
          add(p + conv + "kernel_projection.weight", {int64_t{2} * conv_kernel * (H / conv_group), H}, 0.1f);
        }
    }
    if (conv_kernel > 0) {
      add("candidate_selector.predecessor_codebook", {vocab, sel_rank}, 1.0f);
      add("candidate_selector.successor_codebook", {vocab, sel_rank}, 1.0f);
      add("candidate_selector.hidden_projection.weight", {sel_rank, H}, 0.3f);
    }
  }

  // Makes this a DFlash2 draft (conv kernel 3 over groups of 8 channels,
  // selector rank 8, top-8) and draws its weights.
  void make_dflash2(int H, uint64_t seed, int kernel = 3, int group = 8, int rank = 8, int top_k = 8) {
    conv_kernel = kernel, conv_group = group, sel_rank = rank, sel_top_k = top_k;
    randomize(H, seed);
  }

  std::string config_json(int H) const {
    std::string ids;
    for (int t : taps) ids += (ids.empty() ? "" : ", ") + std::to_string(t);
    std::string extra;
    if (conv_kernel > 0)
      extra += ", \"conv_kernel_size\": " + std::to_string(conv_kernel) + ", \"conv_group_size\": " +
               std::to_string(conv_group) + ", \"selector_rank\": " + std::to_string(sel_rank) +
               ", \"selector_top_k\": " + std::to_string(sel_top_k);
    if (output_multiplier != 1.0f) extra += ", \"output_multiplier\": " + std::to_string(output_multiplier);
    if (softcap != 0.0f) extra += ", \"final_logit_softcapping\": " + std::to_string(softcap);
    return std::string("{\"architectures\": [\"") + (conv_kernel > 0 ? "DFlash2DraftModel" : "DFlashDraftModel") +
           "\"], \"hidden_size\": " + std::to_string(H) +
           ", \"intermediate_size\": " + std::to_string(ffn) + ", \"num_hidden_layers\": " + std::to_string(layers) +
           ", \"num_attention_heads\": " + std::to_string(heads) + ", \"num_key_value_heads\": " +
           std::to_string(kv_heads) + ", \"head_dim\": " + std::to_string(hd) +
           ", \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, \"block_size\": " + std::to_string(block) +
           ", \"dflash_config\": {\"mask_token_id\": " + std::to_string(mask) + ", \"target_layer_ids\": [" + ids +
           "]" + extra + "}}";
  }

  // Writes DIR/config.json and DIR/model.safetensors, leaving out `drop`
  // (a tensor name) and adding `extra` when given.
  void write(const std::string& dir, int H, const std::string& drop = "", const std::string& extra = "") const {
    std::ofstream(dir + "/config.json") << config_json(H);
    std::vector<TensorView> views;
    static const std::vector<float> one(4, 1.0f);
    for (const auto& [name, t] : w) {
      if (name == drop) continue;
      TensorView v;
      v.name = name;
      v.type = DType::F32;
      v.shape = t.first;
      v.data = t.second.data();
      v.nbytes = t.second.size() * sizeof(float);
      views.push_back(v);
    }
    if (!extra.empty()) {
      TensorView v;
      v.name = extra;
      v.shape = {4};
      v.data = one.data();
      v.nbytes = 4 * sizeof(float);
      views.push_back(v);
    }
    write_safetensors(dir + "/model.safetensors", views);
  }

  // Writes the same draft as llama.cpp's converter would (general.architecture
  // "dflash", its key and tensor names, target layers counted from 1, the
  // mask token as a tokenizer key), all tensors f32; `tweak` may change the
  // writer before the file is written.
  void write_gguf(const std::string& path, int H, const std::function<void(GgufWriter&)>& tweak = {}) const {
    GgufWriter g;
    g.set_string("general.architecture", "dflash");
    g.set_u32("dflash.embedding_length", static_cast<uint32_t>(H));
    g.set_u32("dflash.feed_forward_length", static_cast<uint32_t>(ffn));
    g.set_u32("dflash.block_count", static_cast<uint32_t>(layers));
    g.set_u32("dflash.attention.head_count", static_cast<uint32_t>(heads));
    g.set_u32("dflash.attention.head_count_kv", static_cast<uint32_t>(kv_heads));
    g.set_u32("dflash.attention.key_length", static_cast<uint32_t>(hd));
    g.set_u32("dflash.attention.value_length", static_cast<uint32_t>(hd));
    g.set_f32("dflash.attention.layer_norm_rms_epsilon", 1e-6f);
    g.set_f32("dflash.rope.freq_base", 1e6f);
    g.set_u32("dflash.block_size", static_cast<uint32_t>(block));
    g.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask));
    std::vector<int32_t> ids;
    for (int t : taps) ids.push_back(t + 1);
    g.set("dflash.target_layers", GgufMeta::i32s(ids));
    if (conv_kernel > 0) {
      g.set_u32("dflash.conv_kernel_size", static_cast<uint32_t>(conv_kernel));
      g.set_u32("dflash.conv_group_size", static_cast<uint32_t>(conv_group));
      g.set_u32("dflash.selector_rank", static_cast<uint32_t>(sel_rank));
      g.set_u32("dflash.selector_top_k", static_cast<uint32_t>(sel_top_k));
    }
    if (output_multiplier != 1.0f) g.set_f32("dflash.logit_scale", output_multiplier);
    if (softcap != 0.0f) g.set_f32("dflash.final_logit_softcapping", softcap);
    // z-lab's name -> llama.cpp's: whole names first, then per-layer suffixes.
    static const std::map<std::string, std::string> whole = {
        {"fc.weight", "fc.weight"},
        {"hidden_norm.weight", "enc.output_norm.weight"},
        {"norm.weight", "output_norm.weight"},
        {"candidate_selector.predecessor_codebook", "selector_predecessor.weight"},
        {"candidate_selector.successor_codebook", "selector_successor.weight"},
        {"candidate_selector.hidden_projection.weight", "selector_hidden.weight"}};
    static const std::map<std::string, std::string> per_layer = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        {"attention_conv.base_kernel", "attn_conv_base"},
        {"attention_conv.kernel_projection.weight", "attn_conv_proj.weight"},
        {"mlp_conv.base_kernel", "ffn_conv_base"},
        {"mlp_conv.kernel_projection.weight", "ffn_conv_proj.weight"}};
    for (const auto& [name, t] : w) {
      std::string out;
      if (auto it = whole.find(name); it != whole.end()) {
        out = it->second;
      } else {  // layers.N.rest
        const size_t dot = name.find('.', 7);
        out = "blk." + name.substr(7, dot - 7) + "." + per_layer.at(name.substr(dot + 1));
      }
      g.add_tensor(out, DType::F32, t.first, t.second.data(), t.second.size() * sizeof(float));
    }
    if (tweak) tweak(g);
    g.write(path);
  }

  const std::vector<float>& get(const std::string& n) const { return w.at(n).second; }
};

// Random prompt tokens inside the tiny target's vocabulary.
inline std::vector<int32_t> prompt_tokens(int n, uint64_t seed) { return some_tokens(n, 290, seed); }

}  // namespace pocket::test
