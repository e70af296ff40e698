// The plain F32 reference forward pass: every weight dequantized to f32 once,
// one token at a time, naive loops, no SIMD, no threads. It is meant to be
// read top to bottom and trusted; every faster path is tested against it.
// Gemma 3's additions (embedding scale, post-norms, GeGLU, sliding-window
// layers) are spelled out where they apply. It holds a full f32 copy of the weights, so it is for tests and small
// models, not for deployment.
#pragma once
#include <cstdint>
#include <vector>

#include "formats/model_file.h"

namespace pocket {

class ReferenceModel {
 public:
  explicit ReferenceModel(const ModelFile& file);

  const ModelConfig& config() const { return cfg_; }
  int position() const { return pos_; }
  void reset() { pos_ = 0; }

  // Runs one token at the next position; returns the logits (vocab_size).
  const std::vector<float>& forward(int32_t token);

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
    std::vector<float> ffn_norm, w_gate, w_up, w_down;
    std::vector<float> post_attn_norm, post_ffn_norm;  // Gemma
  };

  ModelConfig cfg_;
  std::vector<float> embedding_, output_norm_, output_;  // output_ empty when tied
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer: [max_seq_len][kv_dim]
  std::vector<float> logits_;
  int pos_ = 0;
};

}  // namespace pocket
