// The same weights loaded from llama2.c, GGUF and a Hugging Face safetensors
// folder give the same logits. The real stories260K weights are written to
// each format by Pocket's writers; for the HF folder, q/k rows are permuted
// from llama2.c's adjacent-pair RoPE layout to HF's rotate-half layout, so
// the test also checks that each loader picks the right RoPE convention.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/test_util.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/reference_model.h"
#include "model/synthetic.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

std::vector<float> logits_for(const std::shared_ptr<const ModelFile>& f, const std::vector<int32_t>& tokens) {
  Model model(f);
  ThreadPool pool(1);
  Context ctx(model.config(), 64);
  const int V = model.config().vocab_size;
  std::vector<float> all(tokens.size() * V);
  model.forward(tokens, ctx, pool, all.data(), /*all_logits=*/true);
  return all;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

// HF stores q/k so that RoPE rotates (i, i + d/2); llama2.c so that it
// rotates (2i, 2i + 1). Row 2i of a head becomes row i, row 2i+1 row i + d/2.
std::vector<float> to_rotate_half(const TensorView& t, int n_heads, int head_dim) {
  const int64_t cols = t.cols();
  const float* src = static_cast<const float*>(t.data);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < head_dim; ++i) {
      int dst_row = h * head_dim + (i % 2 == 0 ? i / 2 : i / 2 + head_dim / 2);
      std::copy_n(src + (static_cast<int64_t>(h) * head_dim + i) * cols, cols, out.data() + dst_row * cols);
    }
  return out;
}

std::string hf_name(const std::string& canonical) {
  static const std::pair<const char*, const char*> map[] = {
      {"attn_norm.weight", "input_layernorm.weight"},  {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},     {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},        {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},           {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},  {"attn_k_norm.weight", "self_attn.k_norm.weight"}};
  if (canonical == "token_embd.weight") return "model.embed_tokens.weight";
  if (canonical == "output.weight") return "lm_head.weight";
  if (canonical == "output_norm.weight") return "model.norm.weight";
  size_t dot = canonical.find('.', 4);
  std::string layer = canonical.substr(4, dot - 4), rest = canonical.substr(dot + 1);
  for (auto [from, to] : map)
    if (rest == from) return "model.layers." + layer + "." + to;
  ADD_FAILURE() << "no HF name for " << canonical;
  return canonical;
}

TEST(FormatsAgree, Llama2cGgufAndSafetensorsGiveTheSameLogits) {
  test::TempDir dir;
  auto l2c = std::make_shared<ModelFile>(open_model(test::stories_model()));
  const ModelConfig& c = l2c->config;
  ASSERT_TRUE(c.tied_embeddings);

  // GGUF (architecture llama: adjacent-pair RoPE, the llama2.c layout).
  GgufWriter gw;
  add_config_metadata(gw, c);
  add_vocab_metadata(gw, l2c->vocab, "");
  for (const auto& [name, t] : l2c->tensors) gw.add_tensor(name, t.type, t.shape, t.data, t.nbytes);
  gw.write(dir.file("stories.gguf"));
  auto gguf = std::make_shared<ModelFile>(open_model(dir.file("stories.gguf")));
  EXPECT_EQ(gguf->config.rope_style, RopeStyle::Adjacent);

  // Hugging Face folder with q/k permuted to the rotate-half layout.
  std::string hf = dir.file("hf");
  std::filesystem::create_directory(hf);
  std::vector<std::vector<float>> keep;
  std::vector<TensorView> views;
  for (const auto& [name, t] : l2c->tensors) {
    TensorView v = t;
    v.name = hf_name(name);
    bool q = name.find("attn_q.weight") != std::string::npos, k = name.find("attn_k.weight") != std::string::npos;
    if (q || k) {
      keep.push_back(to_rotate_half(t, q ? c.n_heads : c.n_kv_heads, c.head_dim));
      v.data = keep.back().data();
    }
    views.push_back(v);
  }
  write_safetensors(hf + "/model.safetensors", views);
  std::ofstream(hf + "/config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": )" << c.dim
                                     << R"(, "intermediate_size": )" << c.hidden_dim << R"(, "num_hidden_layers": )"
                                     << c.n_layers << R"(, "num_attention_heads": )" << c.n_heads
                                     << R"(, "num_key_value_heads": )" << c.n_kv_heads
                                     << R"(, "max_position_embeddings": )" << c.max_seq_len
                                     << R"(, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": true, "vocab_size": )"
                                     << c.vocab_size << "}";
  OpenOptions no_vocab;
  no_vocab.require_vocab = false;
  auto hf_model = std::make_shared<ModelFile>(open_model(hf, no_vocab));
  EXPECT_EQ(hf_model->config.rope_style, RopeStyle::Halves);

  const std::vector<int32_t> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
  auto a = logits_for(l2c, tokens), b = logits_for(gguf, tokens), h = logits_for(hf_model, tokens);
  EXPECT_EQ(a, b);  // identical bytes, identical layout
  // Same math with the head dimensions reordered: only summation order
  // differs. The scalar level (double accumulators) agrees within 1e-5; the
  // SIMD levels sum q.k in float partial sums whose grouping follows the
  // element order, measured up to 1.1e-4 of the logit scale on NEON.
  EXPECT_LT(max_rel_diff(h, a), 5e-4);
}

// Qwen2 (biases, separate head) and Qwen3 (q/k norms, explicit head_dim,
// tied head) shapes with synthetic weights, written as GGUF and as a Hugging
// Face folder: both load to the same logits as the in-memory model, and
// those match the reference forward pass.
class QwenThroughFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(QwenThroughFiles, GgufAndHfFolderMatchTheReference) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config(GetParam());
  auto mem = std::make_shared<ModelFile>(make_synthetic_model(spec));
  const ModelConfig& c = mem->config;

  GgufWriter gw;
  add_config_metadata(gw, c);
  for (const auto& [name, t] : mem->tensors) gw.add_tensor(name, t.type, t.shape, t.data, t.nbytes);
  gw.write(dir.file("m.gguf"));
  OpenOptions no_vocab;
  no_vocab.require_vocab = false;
  auto gguf = std::make_shared<ModelFile>(open_model(dir.file("m.gguf"), no_vocab));
  EXPECT_EQ(gguf->config.arch, c.arch);
  EXPECT_EQ(gguf->config.qkv_bias, c.qkv_bias);
  EXPECT_EQ(gguf->config.qk_norm, c.qk_norm);
  EXPECT_EQ(gguf->config.tied_embeddings, c.tied_embeddings);

  std::string hf = dir.file("hf");
  std::filesystem::create_directory(hf);
  std::vector<TensorView> views;
  for (const auto& [name, t] : mem->tensors) {
    TensorView v = t;
    v.name = hf_name(name);
    views.push_back(v);
  }
  write_safetensors(hf + "/model.safetensors", views);
  std::ofstream(hf + "/config.json") << R"({"architectures": [")"
                                     << (c.arch == Arch::Qwen3 ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM")
                                     << R"("], "hidden_size": )" << c.dim << R"(, "intermediate_size": )" << c.hidden_dim
                                     << R"(, "num_hidden_layers": )" << c.n_layers << R"(, "num_attention_heads": )"
                                     << c.n_heads << R"(, "num_key_value_heads": )" << c.n_kv_heads
                                     << R"(, "head_dim": )" << c.head_dim << R"(, "max_position_embeddings": )"
                                     << c.max_seq_len << R"(, "rms_norm_eps": )" << c.norm_eps
                                     << R"(, "rope_theta": )" << c.rope_theta << R"(, "tie_word_embeddings": )"
                                     << (c.tied_embeddings ? "true" : "false") << R"(, "vocab_size": )" << c.vocab_size
                                     << "}";
  auto hf_model = std::make_shared<ModelFile>(open_model(hf, no_vocab));

  const std::vector<int32_t> tokens{3, 141, 59, 26, 5, 35, 89, 79, 32, 38};
  auto a = logits_for(mem, tokens);
  EXPECT_EQ(logits_for(gguf, tokens), a);
  EXPECT_EQ(logits_for(hf_model, tokens), a);

  ReferenceModel ref(*hf_model);
  const int V = c.vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& l = ref.forward(tokens[i]);
    std::vector<float> row(a.begin() + i * V, a.begin() + (i + 1) * V);
    EXPECT_LT(max_rel_diff(row, l), 2e-3) << "token " << i;  // fp16 KV cache vs f32/double reference
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QwenThroughFiles, ::testing::Values("tiny-qwen2", "tiny-qwen3"));

}  // namespace
}  // namespace pocket
