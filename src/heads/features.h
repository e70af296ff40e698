// Features for decision heads: the frozen model's hidden states, pooled.
// Each input is one prefill (all its tokens in one batch, no decoding, no
// output head). Many inputs run on all threads, one input per worker with
// its own KV cache, so the result of each input does not depend on the
// thread count. Whole data sets are cached on disk, keyed by the model's
// content hash, the feature spec and the texts.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "heads/dataset.h"
#include "heads/head.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pocket::heads {

// Row-major n x dim floats.
struct Matrix {
  int64_t rows = 0;
  int cols = 0;
  std::vector<float> data;
  float* row(int64_t i) { return data.data() + i * cols; }
  const float* row(int64_t i) const { return data.data() + i * cols; }
};

// "{text}" in `tmpl` replaced by `text` (every occurrence); `text` itself
// when the template is empty. A template without "{text}" is an error.
std::string apply_template(const std::string& tmpl, const std::string& text);

// The bag-of-tokens features of `ids` (FeatureSpec::Kind::Tokens): out has
// `buckets` floats, out[id % buckets] += 1 / ids.size().
void bag_of_tokens(std::span<const int32_t> ids, int buckets, float* out);

// Pools `n` rows of `dim` floats into `out`.
void pool_rows(const float* rows, int n, int dim, Pooling p, float* out);

// One-worker feature computation on a model; owns a KV cache and a pool.
class FeatureRunner {
 public:
  FeatureRunner(std::shared_ptr<const Model> model, int threads, int max_tokens);
  int dim() const { return model_->config().dim; }
  // Features of a spec of either kind (hidden states or bag of tokens).
  int dim(const FeatureSpec& spec) const { return spec.kind == FeatureSpec::Kind::Tokens ? spec.buckets : dim(); }
  const Model& model() const { return *model_; }
  Context& context() { return ctx_; }
  ThreadPool& pool() { return *pool_; }

  // Pooled features of `tokens` as one fresh sequence, one prefill; only the
  // rows from `pool_from` on are pooled (a pair's candidate after its query).
  void features(std::span<const int32_t> tokens, const FeatureSpec& spec, float* out, size_t pool_from = 0);
  // Runs `prefix` once, then each candidate's tokens after it, pooled over
  // the candidate's rows only. out: candidates.size() x dim. Models without
  // sliding-window layers run the candidates packed into as few batches as
  // the context allows (a copy of the prefix's K/V rows in front of each);
  // others one candidate at a time, the prefix's cache rolled back between.
  void features_after(std::span<const int32_t> prefix, const std::vector<std::vector<int32_t>>& candidates,
                      const FeatureSpec& spec, float* out);
  // Runs `tokens` after what the cache holds, pooled over them (from row `pool_from`).
  void append_and_pool(std::span<const int32_t> tokens, const FeatureSpec& spec, float* out, size_t pool_from = 0);

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  Context ctx_;
  // rows_ sized for n rows, and the taps that write the spec's hidden states there.
  HiddenTaps taps_into_rows(const FeatureSpec& spec, int n);
  std::vector<float> rows_;
};

// Candidates [begin, end) after a q-token prefix held in cache slots [0, q),
// placed for Model::forward_packed: each candidate's tokens (without its last
// one when drop_last: log-likelihood scoring) follow its own copy of the
// prefix's K/V rows, which this copies; the first uses the prefix in place.
struct PackedCandidates {
  std::vector<int32_t> tokens;
  std::vector<int> pos, slot, first;
  std::vector<int> rows;  // rows of each candidate, in order
  PackedRows view() const { return {pos.data(), slot.data(), first.data()}; }
};
PackedCandidates pack_after_prefix(const ModelConfig& c, KVCache& cache, int q,
                                   const std::vector<std::vector<int32_t>>& candidates, size_t begin, size_t end,
                                   bool drop_last);
// Splits the candidates into consecutive groups whose prefix copies and rows
// fit `capacity` slots and `max_rows` rows; calls fn(begin, end) for each.
// A candidate that does not fit with the prefix alone is an error.
void for_each_packed_group(int q, const std::vector<std::vector<int32_t>>& candidates, int capacity, int max_rows,
                           bool drop_last, const std::function<void(size_t, size_t)>& fn);

struct ExtractOptions {
  int threads = 1;
  int max_tokens = 256;         // longer inputs keep their first max_tokens tokens
  std::string cache_dir;        // empty: no disk cache
  std::string model_hash;       // required with cache_dir
  bool progress = false;        // progress with rate and ETA on stderr
  std::string progress_label = "features";
};

// The token sequence of one input: BOS when the vocabulary adds one, the
// templated text; with a query, the query's tokens first (see pair_split).
std::vector<int32_t> encode_input(const Tokenizer& tok, const Example& e, const FeatureSpec& spec, int max_tokens,
                                  size_t* pair_split = nullptr);

// Features of every example (rows in order). Pairs (a query set) are pooled
// over the candidate's tokens only. Kind Tokens runs no model (`model` may be null).
Matrix extract_features(std::shared_ptr<const Model> model, const Tokenizer& tok, const std::vector<Example>& data,
                        const FeatureSpec& spec, const ExtractOptions& opt);

// Where the cache file of this (model, spec, data) would be.
std::string feature_cache_path(const std::string& dir, const std::string& model_hash, const FeatureSpec& spec,
                               const std::vector<Example>& data, int max_tokens, const std::string& kind);
bool read_feature_cache(const std::string& path, int64_t rows, int cols, Matrix& out);
void write_feature_cache(const std::string& path, const Matrix& m);

// Progress line on stderr: done/total, rate, ETA. Returns a callable taking
// the count done; a no-op when `on` is false.
std::function<void(int64_t)> progress_printer(const std::string& label, int64_t total, bool on);

}  // namespace pocket::heads
