// Shared pieces of the format tests: synthetic models, reference GGUF
// quantizers/dequantizers written from the GGUF spec (independent of the
// library's kernels), and byte-level file helpers.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/tensor.h"
#include "core/config.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket::test {

inline ModelConfig small_config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = arch == Arch::Qwen3 ? 32 : 16;  // Qwen3: q is wider than the hidden size
  c.vocab_size = 64;
  c.max_seq_len = 256;
  c.rope_theta = arch == Arch::Llama ? 10000.0f : 1000000.0f;
  c.norm_eps = arch == Arch::Llama ? 1e-5f : 1e-6f;
  c.rope_style = arch == Arch::Llama ? RopeStyle::Adjacent : RopeStyle::Halves;
  c.qkv_bias = arch == Arch::Qwen2;
  c.qk_norm = arch == Arch::Qwen3;
  return c;
}

// Canonical tensor names and shapes for a config (see formats/model_file.h).
inline std::map<std::string, std::vector<int64_t>> canonical_shapes(const ModelConfig& c, bool tied) {
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  std::map<std::string, std::vector<int64_t>> s;
  s["token_embd.weight"] = {c.vocab_size, d};
  s["output_norm.weight"] = {d};
  if (!tied) s["output.weight"] = {c.vocab_size, d};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    s[b + "attn_norm.weight"] = {d};
    s[b + "attn_q.weight"] = {q, d};
    s[b + "attn_k.weight"] = {kv, d};
    s[b + "attn_v.weight"] = {kv, d};
    s[b + "attn_output.weight"] = {d, q};
    if (c.qkv_bias) {
      s[b + "attn_q.bias"] = {q};
      s[b + "attn_k.bias"] = {kv};
      s[b + "attn_v.bias"] = {kv};
    }
    if (c.qk_norm) {
      s[b + "attn_q_norm.weight"] = {c.head_dim};
      s[b + "attn_k_norm.weight"] = {c.head_dim};
    }
    s[b + "ffn_norm.weight"] = {d};
    s[b + "ffn_gate.weight"] = {h, d};
    s[b + "ffn_up.weight"] = {h, d};
    s[b + "ffn_down.weight"] = {d, h};
  }
  return s;
}

// Float weights of a synthetic model, by canonical name.
struct SyntheticWeights {
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> values;

  // F32 views of the values (valid while this object lives).
  std::map<std::string, TensorView> views() const {
    std::map<std::string, TensorView> v;
    for (const auto& [name, data] : values) {
      TensorView t;
      t.name = name;
      t.shape = shapes.at(name);
      t.data = data.data();
      t.nbytes = data.size() * 4;
      v[name] = t;
    }
    return v;
  }
};

inline SyntheticWeights make_weights(const ModelConfig& c, bool tied, uint64_t seed) {
  SyntheticWeights w;
  w.shapes = canonical_shapes(c, tied);
  Rng rng(seed);
  for (const auto& [name, shape] : w.shapes) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float>& v = w.values[name];
    v.resize(static_cast<size_t>(n));
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
  }
  return w;
}

// --- Reference GGUF block quantizers (per the GGUF / ggml spec) -----------

inline std::vector<uint8_t> ref_quantize_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    float d = amax / 127.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t dh = f32_to_f16(d);
    out.push_back(static_cast<uint8_t>(dh & 0xff));
    out.push_back(static_cast<uint8_t>(dh >> 8));
    for (int i = 0; i < 32; ++i) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[b + i] * id))));
  }
  return out;
}

inline std::vector<uint8_t> ref_quantize_q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, max = 0;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(x[b + i]) > amax) amax = std::fabs(x[b + i]), max = x[b + i];
    float d = max / -8.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t dh = f32_to_f16(d);
    out.push_back(static_cast<uint8_t>(dh & 0xff));
    out.push_back(static_cast<uint8_t>(dh >> 8));
    for (int j = 0; j < 16; ++j) {
      auto q = [&](int i) { return static_cast<uint8_t>(std::min(15, static_cast<int>(x[b + i] * id + 8.5f))); };
      out.push_back(static_cast<uint8_t>(q(j) | q(j + 16) << 4));  // low nibble: element j, high: j + 16
    }
  }
  return out;
}

inline std::vector<uint8_t> ref_encode(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> out;
  auto put16 = [&](uint16_t h) {
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
  };
  switch (t) {
    case DType::F32:
      out.resize(x.size() * 4);
      std::memcpy(out.data(), x.data(), out.size());
      return out;
    case DType::F16:
      for (float f : x) put16(f32_to_f16(f));
      return out;
    case DType::BF16:
      for (float f : x) put16(f32_to_bf16(f));
      return out;
    case DType::Q8_0:
      return ref_quantize_q8_0(x);
    case DType::Q4_0:
      return ref_quantize_q4_0(x);
    default:
      ADD_FAILURE() << "no reference encoder for " << dtype_name(t);
      return out;
  }
}

// Reference dequantization of `n` elements stored as type t at p.
inline std::vector<float> ref_decode(DType t, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  auto f16 = [&](size_t off) { return f16_to_f32(static_cast<uint16_t>(p[off] | p[off + 1] << 8)); };
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::F32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case DType::F16:
        out[i] = f16(2 * i);
        break;
      case DType::BF16:
        out[i] = bf16_to_f32(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case DType::Q8_0: {
        size_t blk = (i / 32) * 34;
        out[i] = f16(blk) * static_cast<float>(static_cast<int8_t>(p[blk + 2 + i % 32]));
        break;
      }
      case DType::Q4_0: {
        size_t blk = (i / 32) * 18, j = i % 32;
        uint8_t byte = p[blk + 2 + j % 16];
        int q = j < 16 ? (byte & 0x0f) : (byte >> 4);
        out[i] = f16(blk) * static_cast<float>(q - 8);
        break;
      }
      default:
        ADD_FAILURE() << "no reference decoder for " << dtype_name(t);
    }
  }
  return out;
}

// Largest error the type's rounding allows for values in [-1, 1] (the
// synthetic weights' range): half a step of the format's resolution.
inline float tolerance(DType t) {
  switch (t) {
    case DType::F32: return 0.0f;
    case DType::F16: return 1.0f / 2048;        // 11-bit significand, |x| <= 1
    case DType::BF16: return 1.0f / 256;        // 8-bit significand
    case DType::Q8_0: return 1.0f / 127 * 0.51f + 1e-3f;  // half a step of amax/127, fp16 scale rounding
    case DType::Q4_0: return 1.0f / 8 * 1.01f + 1e-3f;    // one step of amax/8 (the top value clamps to 7)
    default: return 0.0f;
  }
}

// --- Files ------------------------------------------------------------------

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}
inline void write_file(const std::string& path, const std::vector<uint8_t>& b) { write_file(path, b.data(), b.size()); }
inline void write_file(const std::string& path, const std::string& s) { write_file(path, s.data(), s.size()); }

// Runs `f` and returns the pocket::Error message, failing the test if it
// did not throw one.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a pocket::Error";
  return "";
}

}  // namespace pocket::test
