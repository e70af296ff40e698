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
#include "util/page_buffer.h"

namespace pocket {

class ThreadPool;

// Hidden states a caller wants from a forward pass besides (or instead of)
// the logits: rows are the processed tokens, dim floats each. Used by
// decision heads (src/heads) to read features without the output head.
struct HiddenTaps {
  float* final_normed = nullptr;  // the final hidden state after output_norm (what the LM head sees)
  int layer = -1;                 // 0 <= layer < n_layers: also the residual stream after that layer...
  float* layer_out = nullptr;     // ...written here
};

// Independent continuations of the cached sequence packed into one batch
// (decision-head ranking): row i is rotated as position pos[i], written to
// cache slot slot[i] and attends to slots [first[i], slot[i]]. Slots may lie
// past the cache's size, which is left unchanged.
struct PackedRows {
  const int* pos = nullptr;
  const int* slot = nullptr;
  const int* first = nullptr;
};

// Per-sequence state: the KV cache plus scratch buffers sized for one batch.
struct Context {
  Context(const ModelConfig& cfg, int n_ctx, KVType kv = KVType::F16);
  KVCache cache;
  std::vector<float> x, xn, q, k, v, attn, gate, up, scores;
  int batch_capacity = 0;
  // Hidden-state taps (speculative decoding's DFlash drafts): when tap_out
  // is set, the output of each layer in tap_layers (the residual stream
  // after it) at position p goes to tap_out + (p * tap_layers.size() + i) * dim.
  std::vector<int> tap_layers;
  float* tap_out = nullptr;
  // Tree verification's state (Model::forward_tree), made on first use.
  struct TreeStage;
  std::unique_ptr<TreeStage> tree;
};

// The last forward_tree's nodes: every node's keys and values (slot = node
// index, Model::kMaxTreeNodes slots), its parents and depths, the query
// and attention rows of all nodes, and with hidden-state taps each node's
// tapped rows (node x tap_layers.size() x dim, laid out as tap_out's).
struct Context::TreeStage {
  TreeStage(const ModelConfig& cfg, KVType kv);
  KVCache rows;
  std::vector<int> parents, depth;
  std::vector<float> q, attn, taps;
  int base = -1;  // the cache's size when it ran; -1 once committed
};

class Model {
 public:
  // exact_kquants: keep GGUF Q4_K / Q5_K matrices as stored instead of running them
  // as PQ4 / PQ5 with fp16-rounded sub-block scales (quant/source_grid.h: values within
  // 2^-11 of a scale; prefill several times faster).
  explicit Model(std::shared_ptr<const ModelFile> file, bool exact_kquants = false);

  const ModelConfig& config() const { return cfg_; }
  const ModelFile& file() const { return *file_; }
  // Weights re-laid out at load for faster kernels (GGUF Q4_0 as PQ4, Q5_0
  // and Q5_1 as PQ5, Q8_0 as PQ8, the same values exactly, and Q4_K / Q5_K as PQ4 / PQ5 unless
  // exact_kquants: quant/source_grid.h); their file pages are released.
  int repacked_weights() const { return static_cast<int>(repacked_.size()); }
  // Bytes of the weight `name` as the kernels read it: its repacked copy's
  // when it was repacked at load, else the file tensor's (which must exist).
  uint64_t run_nbytes(const std::string& name) const;
  // Whether a matrix of type `t` is repacked at load (kquants: Q4_K and Q5_K too).
  static bool repacks_at_load(DType t, bool kquants);
  // Threads that repack at load, and the rows each has in flight (budget/).
  static int repack_threads();
  static int64_t repack_piece_rows() { return kRepackRows; }

  // Largest number of tokens processed in one batch; longer inputs are split.
  static constexpr int kMaxBatch = 128;

  // Runs `tokens` at positions ctx.cache.size() ... and appends them to the
  // cache. Writes logits for the last token into `logits` (vocab_size
  // floats), or for every token (tokens.size() x vocab_size) when
  // `all_logits` is set (evaluation, speculative verification).
  void forward(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
               bool all_logits = false) const;
  // The same pass, writing the hidden states `taps` asks for (one row per
  // token) and no logits; appends the tokens to the cache like forward().
  void forward_hidden(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, const HiddenTaps& taps) const;
  // Each row placed by `rows` (tokens.size() entries each): writes the
  // hidden states `taps` asks for (may be null) and, when `logits` is set,
  // every row's logits (tokens.size() x vocab_size). Only for models without
  // sliding-window layers (packable()).
  void forward_packed(std::span<const int32_t> tokens, const PackedRows& rows, Context& ctx, ThreadPool& pool,
                      const HiddenTaps* taps, float* logits = nullptr) const;
  bool packable() const;

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

  // Tree verification (speculative decoding with several candidate
  // branches): a tree of tokens after the cached ones in one pass, every
  // matmul over all nodes at once, and each node's attention seeing exactly
  // the cache and its ancestors, laid out as a one-token decode step of that
  // node would see them, so node i's logits (tokens.size() x vocab_size
  // rows) are bit-identical to decoding its root-to-node path. The nodes
  // come in depth-first preorder: parents[0] == -1 (the root, at position
  // cache.size()), and every other parent is an earlier node on the path to
  // the node before it. Each run of nodes whose parent is the node just
  // before it (a chain segment) attends, layer by layer, after its path's
  // rows are copied to slots cache.size().. (the ancestors are already
  // there from the previous segment). The cache's size is unchanged; every
  // node's keys/values stay in ctx.tree_stage (slot = node index) until
  // commit_tree. Only for packable() models. With hidden-state taps, each
  // node's taps are kept apart and committed with its keys/values.
  static constexpr int kMaxTreeNodes = 64;
  void forward_tree(std::span<const int32_t> tokens, std::span<const int> parents, Context& ctx, ThreadPool& pool,
                    float* logits) const;
  // Appends the nodes `path` (root first, each the parent of the next) of
  // the last forward_tree to the cache, copying their keys/values.
  void commit_tree(std::span<const int> path, Context& ctx) const;

 private:
  struct Layer {
    const TensorView *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
    std::vector<float> post_attn_norm, post_ffn_norm;  // Gemma: norms of the block outputs
    const float* inv_freq;                             // RoPE table of this layer (local or global)
  };
  void forward_batch(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
                     bool all_logits, const HiddenTaps* taps = nullptr, const PackedRows* packed = nullptr) const;
  void attention(int layer, int n, int pos0, Context& ctx, ThreadPool& pool, const PackedRows* packed = nullptr) const;
  void embed_row(int32_t token, float* x) const;
  void add_block_output(float* x, float* out, const std::vector<float>& post) const;
  // Where a row's keys/values go: RoPE position, cache slot (the position
  // except for packed rows), and the cache.
  struct RowPlace {
    int pos;
    int slot;
    KVCache* cache;
  };
  void qkv_row(int layer, float* q, float* k, float* v, const RowPlace& at) const;
  void attention_input(int layer, int n, float* x, float* xn, float* q, float* k, float* v, ThreadPool& pool,
                       const std::function<RowPlace(int)>& row_at) const;
  void feed_forward(int layer, int n, float* x, float* xn, float* gate, float* up, ThreadPool& pool) const;

  std::shared_ptr<const ModelFile> file_;
  ModelConfig cfg_;
  const TensorView* embedding_;
  const TensorView* output_;  // the embedding when tied
  std::vector<float> output_norm_;
  std::vector<float> inv_freq_, inv_freq_local_;
  std::vector<Layer> layers_;
  struct Repacked {
    explicit Repacked(size_t n) : bytes(n) {}
    PageBuffer bytes;
    TensorView view;
  };
  static constexpr int64_t kRepackRows = 4096;  // rows per piece of a load-time repack (a multiple of 16)
  std::vector<std::unique_ptr<Repacked>> repacked_;  // owns the views the pointers above may point to
  void repack_weights(bool kquants);
};

}  // namespace pocket
