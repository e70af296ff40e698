// Architecture hyper-parameters, normalised across file formats.
#pragma once
#include <cstdint>
#include <string>

namespace pocket {

enum class Arch : uint8_t { Llama, Qwen2, Qwen3 };

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
  bool qk_norm = false;   // Qwen3

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

std::string arch_name(Arch a);

// Checks ranges and consistency; throws pocket::Error naming `source` and the field.
void validate_config(const ModelConfig& c, const std::string& source);

}  // namespace pocket
