#include "formats/content_hash.h"

#include <algorithm>
#include <vector>

#include "util/thread_pool.h"

namespace pocket {

namespace {

constexpr uint64_t kSample = 4096;  // bytes of each tensor the sampled hash reads, three times

// The configuration's numbers (the sampled hash only: the full hash's
// value is kept as head files store it).
uint64_t config_hash(const ModelConfig& c) {
  Hash64 h;
  for (int v : {static_cast<int>(c.arch), c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim,
                c.vocab_size, static_cast<int>(c.rope_style), static_cast<int>(c.tied_embeddings),
                static_cast<int>(c.qkv_bias), static_cast<int>(c.qk_norm), static_cast<int>(c.ffn_act),
                static_cast<int>(c.post_norms), c.sliding_window, c.swa_pattern})
    h.value(v);
  for (float v : {c.rope_theta, c.norm_eps, c.embed_scale, c.attn_scale, c.final_softcap, c.rope_theta_local})
    h.value(v);
  return h.digest();
}

uint64_t tensor_hash(const std::string& name, const TensorView& t, HashDepth depth) {
  std::string head = name + "|" + std::to_string(static_cast<int>(t.type)) + "|" + std::to_string(t.group);
  for (int64_t d : t.shape) {
    head += '|';
    head += std::to_string(d);
  }
  Hash64 h(hash64(head.data(), head.size()));
  const auto* p = static_cast<const uint8_t*>(t.data);
  if (p == nullptr) return h.digest();
  if (depth == HashDepth::Full) {
    h.update(p, t.nbytes);
  } else {
    const uint64_t n = std::min<uint64_t>(t.nbytes, kSample);
    for (uint64_t at : {uint64_t{0}, (t.nbytes - n) / 2, t.nbytes - n}) h.update(p + at, n);
  }
  return h.digest();
}

}  // namespace

uint64_t model_hash(const ModelFile& f, const Vocab& v, HashDepth depth, ThreadPool* pool) {
  std::vector<const std::pair<const std::string, TensorView>*> tensors;
  for (const auto& kv : f.tensors)  // std::map: name order
    if (kv.first.rfind("head.", 0) != 0) tensors.push_back(&kv);
  std::vector<uint64_t> parts(tensors.size());
  auto one = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto& [name, t] = *tensors[static_cast<size_t>(i)];
      parts[static_cast<size_t>(i)] = tensor_hash(name, t, depth);
    }
  };
  if (pool)
    pool->parallel_for(static_cast<int64_t>(tensors.size()), one);
  else
    one(0, static_cast<int64_t>(tensors.size()), 0);
  std::string vocab;
  for (const std::string& tok : v.tokens) vocab += tok + '\x1f';
  parts.push_back(hash64(vocab.data(), vocab.size(), 7));
  if (depth == HashDepth::Sampled) parts.push_back(config_hash(f.config));
  return hash64(parts.data(), parts.size() * sizeof(uint64_t), 0x504f434b4554ull);
}

std::string model_content_hash(const ModelFile& f, const Vocab& v, ThreadPool* pool) {
  return hex64(model_hash(f, v, HashDepth::Full, pool));
}

}  // namespace pocket
