#include "core/tensor_specs.h"

namespace pocket {

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", c.vocab_size, c.dim});
  t.push_back({"output_norm.weight", 1, c.dim, true});
  if (!c.tied_embeddings) t.push_back({"output.weight", c.vocab_size, c.dim});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", 1, c.dim, true});
    t.push_back({p + "attn_q.weight", c.q_dim(), c.dim});
    t.push_back({p + "attn_k.weight", c.kv_dim(), c.dim});
    t.push_back({p + "attn_v.weight", c.kv_dim(), c.dim});
    t.push_back({p + "attn_output.weight", c.dim, c.q_dim()});
    if (c.qkv_bias) {
      t.push_back({p + "attn_q.bias", 1, c.q_dim(), true});
      t.push_back({p + "attn_k.bias", 1, c.kv_dim(), true});
      t.push_back({p + "attn_v.bias", 1, c.kv_dim(), true});
    }
    if (c.qk_norm) {
      t.push_back({p + "attn_q_norm.weight", 1, c.head_dim, true});
      t.push_back({p + "attn_k_norm.weight", 1, c.head_dim, true});
    }
    if (c.post_norms) t.push_back({p + "post_attention_norm.weight", 1, c.dim, true});
    t.push_back({p + "ffn_norm.weight", 1, c.dim, true});
    t.push_back({p + "ffn_gate.weight", c.hidden_dim, c.dim});
    t.push_back({p + "ffn_up.weight", c.hidden_dim, c.dim});
    t.push_back({p + "ffn_down.weight", c.dim, c.hidden_dim});
    if (c.post_norms) t.push_back({p + "post_ffw_norm.weight", 1, c.dim, true});
  }
  return t;
}

}  // namespace pocket
