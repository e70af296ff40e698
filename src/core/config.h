// Architecture hyper-parameters, normalised across file formats.
#pragma once
#include <cstdint>
#include <string>

namespace pocket {

enum class Arch : uint8_t { Llama, Qwen2, Qwen3, Gemma3 };

// The FFN's gate non-linearity: SwiGLU (Llama, Qwen) or GeGLU with the tanh
// approximation of GELU (Gemma).
enum class Activation : uint8_t { SiLU, GeluTanh };

// How RoPE pairs elements within a head. HF Llama/Qwen and GGUF qwen2/qwen3
// rotate (i, i + d/2) ("NeoX" halves); llama2.c and GGUF llama (whose q/k are
// stored permuted) rotate adjacent pairs (2i, 2i+1).
enum class RopeStyle : uint8_t { Halves, Adjacent };

struct ModelConfig {
  Arch arch = Arch::Llama;
  int dim = 0;         // hidden size
  int hidden_dim = 0;  // FFN inner size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_seq_len = 0;  // context length the model was trained for
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::Halves;
  bool tied_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3, Gemma 3

  // Gemma 3 (the defaults are the Llama/Qwen behaviour).
  Activation ffn_act = Activation::SiLU;
  float embed_scale = 1.0f;   // token embeddings are multiplied by this (Gemma: sqrt(dim))
  float attn_scale = 0.0f;    // scale of q.k; 0 means 1/sqrt(head_dim)
  bool post_norms = false;    // RMSNorm of the attention and FFN outputs before each residual add
  float final_softcap = 0.0f;  // logits = c * tanh(logits / c) when > 0
  // Interleaved local/global attention: with sliding_window > 0, layer l is
  // local (attends to the last sliding_window positions, itself included,
  // RoPE base rope_theta_local) unless (l + 1) is a multiple of swa_pattern;
  // swa_pattern 0 makes every layer local.
  int sliding_window = 0;
  int swa_pattern = 0;
  float rope_theta_local = 10000.0f;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  bool is_local(int layer) const {
    return sliding_window > 0 && (swa_pattern == 0 || (layer + 1) % swa_pattern != 0);
  }
  float layer_rope_theta(int layer) const { return is_local(layer) ? rope_theta_local : rope_theta; }
  float query_scale() const;  // attn_scale, or 1/sqrt(head_dim)
};

std::string arch_name(Arch a);

// Architecture defaults that files do not spell out (Gemma 3's activation,
// embedding scale, norms and attention scale, as llama.cpp and transformers
// apply them). Call after dim, n_layers, n_heads and head_dim are set.
void apply_arch_defaults(ModelConfig& c);

// Checks ranges and consistency; throws pocket::Error naming `source` and the field.
void validate_config(const ModelConfig& c, const std::string& source);

}  // namespace pocket
