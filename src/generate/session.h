// A generation session: one model, one KV cache, the tokens that cache holds,
// and the loop that feeds a prompt and samples a continuation.
//
// generate() takes the whole token sequence the model should see. The part
// that matches what the cache already holds is reused; only the rest is
// processed. Multi-turn chat therefore recomputes nothing of earlier turns.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/constraint.h"
#include "generate/sampler.h"
#include "model/model.h"
#include "util/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace pocket {

struct GenerateOptions {
  int max_tokens = 256;
  std::vector<std::string> stop_strings;
  bool stop_at_eos = true;
  SamplerConfig sampling;
  // Asked before each batch of the prompt and each decode step; true ends
  // the call there (Stop::Cancelled), so it returns within one step. Set
  // from another thread through an atomic (Engine::cancel).
  std::function<bool()> cancelled;
  // Called after each batch of the prompt with the fraction of its new
  // (not reused) tokens processed; returning false ends the call there
  // (Stop::Cancelled).
  std::function<bool(float)> prefill_progress;
  // Structured output (src/constrain/): only tokens the constraint allows
  // are sampled (the mask is applied before sampling truncation), and
  // end-of-sequence only where the output is a complete match.
  std::shared_ptr<const constrain::Constraint> constraint;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (without a final end-of-sequence id)
  std::string text;             // their text, cut at a stop string
  int prompt_tokens = 0;        // tokens in the input sequence
  int reused_tokens = 0;        // of those, already in the cache
  double prefill_seconds = 0, decode_seconds = 0;
  enum class Stop { Eos, StopString, MaxTokens, ContextFull, Callback, Cancelled, ConstraintEnd } stop = Stop::MaxTokens;
  int32_t eos_token = -1;       // the end-of-sequence id that ended generation, if any
  // With a constraint: whether the text is a complete match. False when max
  // tokens, the context, a stop string or the caller ended it first.
  bool constraint_used = false, constraint_complete = false;
  std::vector<float> mask_us;   // per sampled token: time to get its mask (microseconds)
};

const char* stop_reason_name(GenerateResult::Stop s);

// Sets to -inf the logits of the tokens the matcher's constraint excludes
// here (and any logits past the tokenizer's vocabulary), as generate() does
// before sampling; returns the microseconds it took to get the mask. Throws
// when no token can continue.
float apply_constraint(constrain::Matcher& m, std::span<float> logits);

class Session {
 public:
  // `batch`: prompt tokens run per forward pass (chunked prefill; 1 to
  // Model::kMaxBatch, 0 = Model::kMaxBatch). Smaller chunks bound the
  // scratch memory; the results are the same for any chunk size.
  // kv: the KV cache's element type (--kv).
  Session(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, int n_ctx, int n_threads,
          int batch = 0, KVType kv = KVType::F16);
  // The same on `pool`, which sessions used from one thread, one at a time,
  // may share (a draft model beside its target: one set of worker threads,
  // none left spinning for one session while the other computes).
  Session(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, int n_ctx,
          std::shared_ptr<ThreadPool> pool, int batch = 0, KVType kv = KVType::F16);

  // Streams text pieces to `on_text` (return false to stop early).
  GenerateResult generate(std::span<const int32_t> input, const GenerateOptions& opt,
                          const std::function<bool(std::string_view)>& on_text = {});

  // Processes `input` (reusing the cached prefix) and returns the logits of
  // its last token. Used by generate() and by evaluation. The input runs in
  // chunks of batch() tokens. With `cancelled`, the function is asked
  // before each: when it says true, prefill returns an empty span, and the
  // batches already run stay cached (a later call reuses them). `progress`
  // is told the fraction done after each batch and may stop it the same way.
  std::span<float> prefill(std::span<const int32_t> input, const std::function<bool()>& cancelled = {},
                           const std::function<bool(float)>& progress = {});
  // prefill() without the output head: the same prefix reuse and cache,
  // returning the final hidden state (after the output norm: what the head
  // sees) of the last token, dim floats, valid until the next call. For
  // drafters that score part of the vocabulary (speculative/draft_vocab.h).
  std::span<const float> prefill_hidden(std::span<const int32_t> input);
  // Throws the error prefill() would for an empty or over-long input, so a
  // caller can report it before printing anything.
  void check_fits(std::span<const int32_t> input) const;

  // Speculative decoding (src/speculative/): runs `block` after the cached
  // tokens in one batched forward and returns every row's logits
  // (block.size() x vocab_size); rollback(n) keeps only the first n cached
  // tokens (the KV rows are dropped, not copied). Errors as prefill's.
  std::span<float> verify(std::span<const int32_t> block);
  void rollback(size_t n);
  // Tree verification (Model::forward_tree): a tree of candidate tokens
  // after the cached ones (depth-first preorder, parents[0] == -1), every
  // node's logits (tokens.size() x vocab_size rows) in one pass, each
  // bit-identical to decoding the node's root-to-node path. Caches nothing
  // until accept_tree(path) appends the chosen path (root first, each node
  // the parent of the next; may be empty) and its keys/values.
  std::span<float> verify_tree(std::span<const int32_t> tokens, std::span<const int> parents);
  void accept_tree(std::span<const int> path);
  // Whether verify_tree works with this session (no sliding-window layers;
  // with hidden-state taps, the accepted path's taps are committed too).
  bool tree_verifiable() const { return model_->packable(); }

  // Keeps the hidden states after the given target layers for every cached
  // position (DFlash drafts read them); starts over (reset()) so every
  // cached position has them. hidden_taps(p): layers.size() x dim floats.
  void enable_hidden_taps(std::vector<int> layers);
  const float* hidden_taps(int pos) const;

  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  // Saved sessions (state/session_state.h): writes the cached tokens, the KV
  // cache and `conversation` (chat's tokens, may be empty) to `path`;
  // load_state replaces this session's cache with a saved one (same model
  // and KV type, a context that holds it) and returns the conversation.
  void save_state(const std::string& path, const std::vector<int32_t>& conversation = {}) const;
  std::vector<int32_t> load_state(const std::string& path);
  // The same in memory (generate/prefix_cache.h): the state's bytes, and
  // loading them (`source` names them in errors).
  std::string snapshot(const std::vector<int32_t>& conversation = {}) const;
  std::vector<int32_t> restore(const uint8_t* data, size_t size, const std::string& source);
  // Copy-on-write sharing (model/kv_cache.h): an image of the cache (null
  // where not available), and adopting an image taken from a session of the
  // same shape whose cache held `tokens` (false, nothing changed, when the
  // shapes differ).
  std::shared_ptr<const KVImage> kv_image() const { return ctx_.cache.image(); }
  bool adopt(const KVImage& image, const std::vector<int32_t>& tokens);
  int context_size() const { return ctx_.cache.capacity(); }
  int batch() const { return batch_; }
  void reset();
  // Replaces the worker pool (results are identical for any count).
  void set_threads(int n_threads);
  int threads() const { return pool_->size(); }

  // For decoding several sessions in one batched forward pass
  // (Model::forward_decode, server/): the context, and the record that
  // `token` was run into it there.
  Context& context() { return ctx_; }
  void append_cached(int32_t token) { cached_.push_back(token); }

  const Model& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tok_; }
  ThreadPool& pool() { return *pool_; }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return pool_; }

 private:
  // Length of the longest prefix of `input` whose keys/values are cached.
  size_t common_prefix(std::span<const int32_t> input) const;
  // prefill()'s start: checks `input`, drops the cached positions past the
  // reusable prefix and returns the tokens still to run (at least one).
  std::span<const int32_t> uncached_rest(std::span<const int32_t> input);

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tok_;
  std::shared_ptr<ThreadPool> pool_;
  Context ctx_;
  int batch_;
  std::vector<int32_t> cached_;  // tokens whose keys/values are in ctx_.cache
  std::vector<float> logits_;
  std::vector<float> hidden_;        // prefill_hidden()'s last chunk
  std::vector<float> block_logits_;  // verify()'s rows
  std::vector<int32_t> tree_tokens_;  // verify_tree()'s nodes, until accept_tree()
  std::unique_ptr<float[]> taps_;    // enable_hidden_taps(): capacity x layers x dim
  void zero_taps_of_cached();
};

}  // namespace pocket
