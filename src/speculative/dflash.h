// DFlash block drafts (z-lab's published format: a folder with config.json
// and model.safetensors, or the same converted into a quantized Pocket file
// by `pocket convert-draft`: speculative/dflash_file.h). A few Qwen3 decoder layers draft a whole block in
// one pass: the block is [last accepted token, mask x (B-1)] embedded with
// the target's embedding; its queries attend, without a causal mask, to the
// block itself and to context keys/values made from the target's own
// hidden states (the outputs of `target_layer_ids`, concatenated, projected
// by fc and normed by hidden_norm), which the target taps during its
// forward passes at no extra cost (Session::enable_hidden_taps). Logits come
// from the target's output head, or from its rows for the draft's reduced
// vocabulary (speculative/draft_vocab.h) when it has one.
// DFlash2 drafts (speculative/dflash2.h) add per layer a grouped dynamic
// causal convolution around attention and around the MLP, and a low-rank
// candidate selector that rescores each position's top-k logits by the
// token chosen before it. GGUF files with llama.cpp's dflash.* keys are read
// too (speculative/dflash_gguf.h).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "generate/session.h"
#include "speculative/dflash2.h"
#include "speculative/draft_vocab.h"
#include "speculative/drafter.h"

namespace pocket {

struct DFlashConfig {
  int hidden = 0, ffn = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 1e-6f, rope_theta = 10000.0f;
  int block_size = 0, mask_token_id = -1, target_layers = 0;
  std::vector<int> target_layer_ids;
  // Applied to the draft's logits (1 and 0: none).
  float output_multiplier = 1.0f, final_logit_softcapping = 0.0f;
  // DFlash2 (all 0 for a DFlash draft): conv taps and channels per dynamic
  // group; the selector's rank and candidates per position.
  int conv_kernel = 0, conv_group = 0, selector_rank = 0, selector_top_k = 0;
  bool dflash2() const { return conv_kernel > 0; }
};

class DFlashDraft {
 public:
  // Reads a draft folder (DIR/config.json and DIR/model.safetensors, and
  // DIR/draft_vocab.txt when present) or a Pocket draft file
  // (speculative/dflash_file.h); checks every shape (and that the draft fits
  // `target`: hidden size, layer ids, mask token, the ranking's vocabulary).
  DFlashDraft(const std::string& path, const ModelConfig& target);
  DFlashDraft(const DFlashDraft&) = delete;
  DFlashDraft& operator=(const DFlashDraft&) = delete;
  const DFlashConfig& config() const { return cfg_; }
  // The frequency ranking of the target's tokens stored with the draft, or null.
  const DraftVocab* draft_vocab() const { return draft_vocab_ ? &*draft_vocab_ : nullptr; }

  struct Layer {
    const TensorView *q, *k, *v, *o, *gate, *up, *down;
    std::vector<float> in_norm, post_norm, q_norm, k_norm;
    Dflash2Conv attn_conv, mlp_conv;  // DFlash2 only (kernel_projection null otherwise)
  };
  const TensorView& fc() const { return *fc_; }
  const std::vector<float>& hidden_norm() const { return hidden_norm_; }
  const std::vector<float>& norm() const { return norm_; }
  const Layer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  const Dflash2Selector& selector() const { return selector_; }

 private:
  DFlashConfig cfg_;
  std::optional<DraftVocab> draft_vocab_;
  std::map<std::string, TensorView> tensors_;  // views into one of:
  std::optional<SafetensorsFile> folder_;
  std::shared_ptr<const MappedFile> file_;
  const TensorView* fc_;
  std::vector<float> hidden_norm_, norm_;
  std::vector<Layer> layers_;
  Dflash2Selector selector_;
};

// The drafter: keeps the draft's context keys/values for the positions the
// target has accepted (rolled back with it) and drafts block_size - 1 tokens
// per call. Enables the hidden-state taps on `session` (which starts over).
// `draft_vocab`: score only the N most frequent tokens of the draft's
// ranking (N > 0), the whole vocabulary (0), or kDefaultDraftVocab tokens
// when the draft has a ranking (kDraftVocabDefault); N >= the vocabulary is
// the whole vocabulary. The target verifies every token either way.
inline constexpr int kDraftVocabDefault = -1;
class DFlashDrafter : public Drafter {
 public:
  DFlashDrafter(std::shared_ptr<const DFlashDraft> draft, Session& session, int draft_vocab = kDraftVocabDefault);
  const char* name() const override { return draft_->config().dflash2() ? "dflash2" : "dflash"; }
  // Each drafted row's argmax (DFlash), or the candidate selector's picks
  // (DFlash2: speculative/dflash2.h).
  void draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) override;
  // The drafted chain, plus at each of its first kTreeBranchPositions
  // positions the row's likeliest other token (when its probability under
  // the draft is at least kTreeMinProbability) as a branch that keeps the
  // chain's later tokens: a block predicts its positions in parallel (each
  // from the context and mask tokens, not from the tokens drafted before
  // it), so a later guess does not depend on which token came before it.
  void draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) override;
  static constexpr int kTreeBranchPositions = 3;
  static constexpr float kTreeMinProbability = 0.05f;
  // The draft's context keys/values for the whole prefilled prompt.
  void prepare(std::span<const int32_t> history) override;
  // The block through the draft's layers, attention over the context and
  // the head's rows, against fc and the layers' keys/values per position.
  double draft_cost_in_catch_ups(int rows, int context) const override;
  // The draft's logits for block positions 1..rows (all B-1 when rows < 0)
  // after `history` (whose last token is the anchor, not yet run by the
  // target): rows x logits_width(); column j is token token_of(j); after
  // output_multiplier and final_logit_softcapping when the draft sets them.
  const std::vector<float>& block_logits(std::span<const int32_t> history, int rows = -1);
  int logits_width() const;
  int32_t token_of(int column) const { return subset_ ? subset_->ids()[static_cast<size_t>(column)] : column; }

 private:
  void extend_context(std::span<const int32_t> history, int upto);
  // Stores rows [0, n) of k / v (n x kv_heads*head_dim) at positions pos.. of layer l.
  void store_kv(int l, int pos, int n, const float* k, const float* v);

  std::shared_ptr<const DFlashDraft> draft_;
  Session& session_;
  const TensorView* embedding_;
  const TensorView* output_;
  std::unique_ptr<const SubsetHead> subset_;  // the reduced vocabulary's head rows, when one is used
  int ctx_len_ = 0;
  std::vector<int32_t> ctx_tokens_;
  // Per layer and KV head, fp16 rows as the attention kernel reads them:
  // [position][head_dim], the context, then (during block_logits) the block.
  std::vector<std::vector<uint16_t>> ctx_k_, ctx_v_;  // index layer * kv_heads + head
  std::vector<float> final_norm_;  // the target's, for a tap after its last layer
  std::vector<float> inv_freq_, h_, x_, q_, k_, v_, attn_, gate_, up_, logits_, scores_;
  std::vector<float> dyn_, conv_, proj_;  // DFlash2: conv coefficients, conv output, selector projection
};

}  // namespace pocket
