#include "core/config.h"

#include <cmath>

#include "util/error.h"

namespace pocket {

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::Llama:
      return "llama";
    case Arch::Qwen2:
      return "qwen2";
    case Arch::Qwen3:
      return "qwen3";
    case Arch::Gemma3:
      return "gemma3";
  }
  return "?";
}

float ModelConfig::query_scale() const {
  return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

void apply_arch_defaults(ModelConfig& c) {
  if (c.arch != Arch::Gemma3) return;
  c.ffn_act = Activation::GeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.post_norms = true;
  c.rope_style = RopeStyle::Halves;
  // Gemma 3 scales queries by query_pre_attn_scalar^-1/2: head_dim, except
  // for the 27B model (62 layers), which uses dim / n_heads.
  const int scalar = c.n_layers == 62 && c.n_heads > 0 ? c.dim / c.n_heads : c.head_dim;
  if (scalar > 0) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
}

void validate_config(const ModelConfig& c, const std::string& source) {
  // Limits are generous for real models but small enough that products of
  // them cannot overflow 64-bit sizes.
  auto check = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) fail(source, ": ", field, " = ", v, " is out of range [", lo, ", ", hi, "]");
  };
  check("dim (hidden size)", c.dim, 1, 1 << 16);
  check("hidden_dim (FFN size)", c.hidden_dim, 1, 1 << 18);
  check("n_layers", c.n_layers, 1, 1024);
  check("n_heads", c.n_heads, 1, 1024);
  check("n_kv_heads", c.n_kv_heads, 1, c.n_heads);
  check("head_dim", c.head_dim, 2, 1024);
  check("vocab_size", c.vocab_size, 1, 1 << 22);
  check("max_seq_len (context length)", c.max_seq_len, 1, 1 << 22);
  if (c.n_heads % c.n_kv_heads != 0)
    fail(source, ": n_heads (", c.n_heads, ") is not a multiple of n_kv_heads (", c.n_kv_heads, ")");
  if (c.head_dim % 2 != 0) fail(source, ": head_dim (", c.head_dim, ") must be even for RoPE");
  if (!(c.rope_theta > 0.0f) || c.rope_theta > 1e12f) fail(source, ": rope_theta = ", c.rope_theta, " is invalid");
  if (!(c.norm_eps > 0.0f) || c.norm_eps > 1.0f) fail(source, ": norm_eps = ", c.norm_eps, " is invalid");
  if (c.sliding_window < 0 || c.sliding_window > (1 << 22))
    fail(source, ": sliding_window = ", c.sliding_window, " is out of range [0, ", 1 << 22, "]");
  if (c.swa_pattern < 0 || c.swa_pattern > 1024)
    fail(source, ": sliding-window pattern = ", c.swa_pattern, " is out of range [0, 1024]");
  if (c.sliding_window > 0 && (!(c.rope_theta_local > 0.0f) || c.rope_theta_local > 1e12f))
    fail(source, ": local-layer rope_theta = ", c.rope_theta_local, " is invalid");
  if (!(c.embed_scale > 0.0f) || c.embed_scale > 1e6f) fail(source, ": embedding scale = ", c.embed_scale, " is invalid");
  if (!(c.attn_scale >= 0.0f) || c.attn_scale > 1e3f) fail(source, ": attention scale = ", c.attn_scale, " is invalid");
  if (!(c.final_softcap >= 0.0f) || c.final_softcap > 1e6f)
    fail(source, ": final logit soft-cap = ", c.final_softcap, " is invalid");
}

}  // namespace pocket
