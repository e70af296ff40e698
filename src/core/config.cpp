#include "core/config.h"

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
  }
  return "?";
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
}

}  // namespace pocket
