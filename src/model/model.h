// The fast forward pass: weights used in place from the mapped file, batched
// prompt processing (prefill) and one-token decode through the dispatched
// kernels, fp16 KV cache (sliding-window layers keep only their window).
// Tested against ReferenceModel.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "formats/model_file.h"
#include "model/kv_cache.h"

namespace pocket {

class ThreadPool;

// Per-sequence state: the KV cache plus scratch buffers sized for one batch.
struct Context {
  Context(const ModelConfig& cfg, int n_ctx);
  KVCache cache;
  std::vector<float> x, xn, q, k, v, attn, gate, up, scores;
  int batch_capacity = 0;
  // Hidden-state taps (speculative decoding's DFlash drafts): when tap_out
  // is set, the output of each layer in tap_layers (the residual stream
  // after it) at position p goes to tap_out + (p * tap_layers.size() + i) * dim.
  std::vector<int> tap_layers;
  float* tap_out = nullptr;
};

class Model {
 public:
  explicit Model(std::shared_ptr<const ModelFile> file);

  const ModelConfig& config() const { return cfg_; }
  const ModelFile& file() const { return *file_; }
  // Weights re-laid out at load for faster kernels (GGUF Q4_0 as PQ4, the
  // same values exactly: quant/repack.h); their file pages are released.
  int repacked_weights() const { return static_cast<int>(repacked_.size()); }

  // Largest number of tokens processed in one batch; longer inputs are split.
  static constexpr int kMaxBatch = 128;

  // Runs `tokens` at positions ctx.cache.size() ... and appends them to the
  // cache. Writes logits for the last token into `logits` (vocab_size
  // floats), or for every token (tokens.size() x vocab_size) when
  // `all_logits` is set (evaluation, speculative verification).
  void forward(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
               bool all_logits = false) const;

  // Batched decode across sequences: one token for each of several contexts
  // (tokens[i] runs at position ctxs[i]->cache.size() of ctxs[i], distinct
  // contexts) in one pass, so each weight is read once for all of them;
  // attention of each row uses its own context's cache. Writes
  // tokens.size() x vocab_size logits. `scratch` holds the stacked rows
  // between calls. Same logits as a one-token forward() per context.
  struct DecodeScratch {
    std::vector<float> x, xn, q, k, v, attn, gate, up;
  };
  void forward_decode(std::span<const int32_t> tokens, std::span<Context* const> ctxs, ThreadPool& pool,
                      float* logits, DecodeScratch& scratch) const;

 private:
  struct Layer {
    const TensorView *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
    std::vector<float> post_attn_norm, post_ffn_norm;  // Gemma: norms of the block outputs
    const float* inv_freq;                             // RoPE table of this layer (local or global)
  };
  void forward_batch(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
                     bool all_logits) const;
  void attention(int layer, int n, int pos0, Context& ctx, ThreadPool& pool) const;
  void embed_row(int32_t token, float* x) const;
  void add_block_output(float* x, float* out, const std::vector<float>& post) const;
  void qkv_row(int layer, float* q, float* k, float* v, int pos, KVCache& cache) const;
  void attention_input(int layer, int n, float* x, float* xn, float* q, float* k, float* v, ThreadPool& pool,
                       const std::function<std::pair<int, KVCache*>(int)>& row_at) const;
  void feed_forward(int layer, int n, float* x, float* xn, float* gate, float* up, ThreadPool& pool) const;

  std::shared_ptr<const ModelFile> file_;
  ModelConfig cfg_;
  const TensorView* embedding_;
  const TensorView* output_;  // the embedding when tied
  std::vector<float> output_norm_;
  std::vector<float> inv_freq_, inv_freq_local_;
  std::vector<Layer> layers_;
  struct Repacked {
    std::vector<uint8_t> bytes;
    TensorView view;
  };
  std::vector<std::unique_ptr<Repacked>> repacked_;  // owns the views the pointers above may point to
  void repack_weights();
};

}  // namespace pocket
