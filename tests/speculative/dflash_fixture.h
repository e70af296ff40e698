// Shared by the DFlash tests: a tiny random-weight Qwen3 target (f32) and
// random DFlash drafts for it written in z-lab's folder layout.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "convert/create_model.h"
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
    }
  }

  std::string config_json(int H) const {
    std::string ids;
    for (int t : taps) ids += (ids.empty() ? "" : ", ") + std::to_string(t);
    return "{\"architectures\": [\"DFlashDraftModel\"], \"hidden_size\": " + std::to_string(H) +
           ", \"intermediate_size\": " + std::to_string(ffn) + ", \"num_hidden_layers\": " + std::to_string(layers) +
           ", \"num_attention_heads\": " + std::to_string(heads) + ", \"num_key_value_heads\": " +
           std::to_string(kv_heads) + ", \"head_dim\": " + std::to_string(hd) +
           ", \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, \"block_size\": " + std::to_string(block) +
           ", \"dflash_config\": {\"mask_token_id\": " + std::to_string(mask) + ", \"target_layer_ids\": [" + ids +
           "]}}";
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

  const std::vector<float>& get(const std::string& n) const { return w.at(n).second; }
};

// Random prompt tokens inside the tiny target's vocabulary.
inline std::vector<int32_t> prompt_tokens(int n, uint64_t seed) { return some_tokens(n, 290, seed); }

}  // namespace pocket::test
