#include "generate/session.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>

#include "generate/constrained_sample.h"
#include "generate/text_stream.h"
#include "state/session_state.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

// Masks the logits of the tokens the constraint excludes (and any logits
// past the tokenizer's vocabulary); returns the microseconds it took to get
// the mask.
float apply_constraint(constrain::Matcher& m, std::span<float> logits) {
  const auto t0 = std::chrono::steady_clock::now();
  std::span<const uint64_t> mask = m.mask();
  const float us = static_cast<float>(seconds_since(t0) * 1e6);
  const size_t n = logits.size();
  bool any = false;
  for (size_t w = 0; w < mask.size(); ++w) {
    uint64_t bits = mask[w];
    any |= bits != 0;
    if (bits == ~uint64_t{0}) continue;
    const size_t base = w * 64, end = std::min(n, base + 64);
    for (size_t i = base; i < end; ++i)
      if (!((bits >> (i - base)) & 1)) logits[i] = -std::numeric_limits<float>::infinity();
  }
  for (size_t i = mask.size() * 64; i < n; ++i) logits[i] = -std::numeric_limits<float>::infinity();
  if (!any) fail("constraint: no token of the vocabulary can continue the output here");
  return us;
}

const char* stop_reason_name(GenerateResult::Stop s) {
  switch (s) {
    case GenerateResult::Stop::Eos:
      return "eos";
    case GenerateResult::Stop::StopString:
      return "stop string";
    case GenerateResult::Stop::MaxTokens:
      return "max tokens";
    case GenerateResult::Stop::ContextFull:
      return "context full";
    case GenerateResult::Stop::Callback:
      return "stopped by caller";
    case GenerateResult::Stop::Cancelled:
      return "cancelled";
    case GenerateResult::Stop::ConstraintEnd:
      return "constraint complete";
  }
  return "?";
}

Session::Session(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, int n_ctx,
                 int n_threads, int batch, KVType kv)
    : Session(std::move(model), std::move(tokenizer), n_ctx, std::make_shared<ThreadPool>(n_threads), batch, kv) {}

Session::Session(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, int n_ctx,
                 std::shared_ptr<ThreadPool> pool, int batch, KVType kv)
    : model_(std::move(model)),
      tok_(std::move(tokenizer)),
      pool_(std::move(pool)),
      ctx_(model_->config(), n_ctx, kv),
      batch_(batch == 0 ? Model::kMaxBatch : batch) {
  if (batch < 0 || batch > Model::kMaxBatch)
    fail_as(ErrorCode::InvalidArgument, "batch ", batch, " is outside [1, ", Model::kMaxBatch, "] (0 = ", Model::kMaxBatch, ")");
  if (tok_->vocab_size() > model_->config().vocab_size)
    fail("the tokenizer has ", tok_->vocab_size(), " tokens but the model only ", model_->config().vocab_size);
  logits_.resize(model_->config().vocab_size);
}

size_t Session::common_prefix(std::span<const int32_t> input) const {
  size_t n = 0;
  while (n < cached_.size() && n < input.size() && cached_[n] == input[n]) ++n;
  return n;
}

void Session::reset() {
  ctx_.cache.clear();
  cached_.clear();
  tree_tokens_.clear();
}

void Session::save_state(const std::string& path, const std::vector<int32_t>& conversation) const {
  save_session_state(path, *model_, ctx_.cache, {cached_, conversation});
}

std::vector<int32_t> Session::load_state(const std::string& path) {
  auto file = MappedFile::open(path);
  return restore(file->data(), file->size(), path);
}

std::string Session::snapshot(const std::vector<int32_t>& conversation) const {
  std::ostringstream out;
  write_session_state(out, *model_, ctx_.cache, {cached_, conversation});
  return std::move(out).str();
}

std::vector<int32_t> Session::restore(const uint8_t* data, size_t size, const std::string& source) {
  SessionState s = read_session_state(data, size, source, *model_, ctx_.cache);
  cached_ = std::move(s.cached);
  zero_taps_of_cached();
  return std::move(s.conversation);
}

bool Session::adopt(const KVImage& image, const std::vector<int32_t>& tokens) {
  if (image.size() != static_cast<int>(tokens.size())) fail("adopt: an image of ", image.size(), " positions for ", tokens.size(), " tokens");
  if (!ctx_.cache.adopt(image)) return false;
  cached_ = tokens;
  zero_taps_of_cached();
  return true;
}

void Session::set_threads(int n_threads) {
  if (n_threads < 1) fail_as(ErrorCode::InvalidArgument, "thread count ", n_threads, " must be >= 1");
  if (n_threads != pool_->size()) pool_ = std::make_shared<ThreadPool>(n_threads);
}

void Session::check_fits(std::span<const int32_t> input) const {
  if (input.empty()) fail_as(ErrorCode::InvalidArgument, "the prompt is empty (no tokens)");
  if (static_cast<int>(input.size()) > ctx_.cache.capacity())
    fail_as(ErrorCode::ContextFull, "the prompt has ", input.size(), " tokens but the context holds ", ctx_.cache.capacity(),
         " (raise the context size with -c or shorten the prompt)");
}

std::span<const int32_t> Session::uncached_rest(std::span<const int32_t> input) {
  check_fits(input);
  tree_tokens_.clear();
  // Reuse the longest common prefix, but always run at least the last token
  // so that its logits are fresh.
  size_t common = common_prefix(input);
  if (common == input.size()) --common;
  // Sliding-window layers keep only recent positions: a prefix that ends
  // before them is recomputed from the start.
  if (common < static_cast<size_t>(ctx_.cache.rollback_limit())) common = 0;
  ctx_.cache.truncate(static_cast<int>(common));
  cached_.resize(common);
  return input.subspan(common);
}

std::span<const float> Session::prefill_hidden(std::span<const int32_t> input) {
  auto rest = uncached_rest(input);
  const size_t dim = static_cast<size_t>(model_->config().dim);
  const size_t chunk = static_cast<size_t>(batch_);
  hidden_.resize(chunk * dim);
  size_t last_rows = 0;
  for (size_t done = 0; done < rest.size(); done += chunk) {
    auto batch = rest.subspan(done, std::min<size_t>(chunk, rest.size() - done));
    model_->forward_hidden(batch, ctx_, *pool_, HiddenTaps{.final_normed = hidden_.data()});
    cached_.insert(cached_.end(), batch.begin(), batch.end());
    last_rows = batch.size();
  }
  return {hidden_.data() + (last_rows - 1) * dim, dim};
}

std::span<float> Session::prefill(std::span<const int32_t> input, const std::function<bool()>& cancelled,
                                  const std::function<bool(float)>& progress) {
  auto rest = uncached_rest(input);
  if (!cancelled && !progress && batch_ == Model::kMaxBatch) {
    model_->forward(rest, ctx_, *pool_, logits_.data());
    cached_.insert(cached_.end(), rest.begin(), rest.end());
    return logits_;
  }
  // The forward pass is batch-invariant: any chunk size gives the same result.
  const size_t chunk = static_cast<size_t>(batch_);
  for (size_t done = 0; done < rest.size(); done += chunk) {
    if (cancelled && cancelled()) return {};
    auto batch = rest.subspan(done, std::min<size_t>(chunk, rest.size() - done));
    const bool last = done + batch.size() == rest.size();
    model_->forward(batch, ctx_, *pool_, last ? logits_.data() : nullptr);
    cached_.insert(cached_.end(), batch.begin(), batch.end());
    if (progress && !progress(static_cast<float>(done + batch.size()) / static_cast<float>(rest.size()))) return {};
  }
  return logits_;
}

std::span<float> Session::verify(std::span<const int32_t> block) {
  if (block.empty()) fail_as(ErrorCode::InvalidArgument, "verify: no tokens");
  if (ctx_.cache.size() + block.size() > static_cast<size_t>(ctx_.cache.capacity()))
    fail_as(ErrorCode::ContextFull, "verify: ", block.size(), " tokens do not fit the context after ", ctx_.cache.size());
  const size_t rows = block.size() * static_cast<size_t>(model_->config().vocab_size);
  if (block_logits_.size() < rows) block_logits_.resize(rows);
  tree_tokens_.clear();  // a verified tree is accepted before the cache moves on, or not at all
  model_->forward(block, ctx_, *pool_, block_logits_.data(), /*all_logits=*/true);
  cached_.insert(cached_.end(), block.begin(), block.end());
  return {block_logits_.data(), rows};
}

std::span<float> Session::verify_tree(std::span<const int32_t> tokens, std::span<const int> parents) {
  if (tokens.empty()) fail_as(ErrorCode::InvalidArgument, "verify: no tokens");
  if (!model_->packable()) fail_as(ErrorCode::InvalidArgument, "tree verify: the model has sliding-window layers");
  const size_t rows = tokens.size() * static_cast<size_t>(model_->config().vocab_size);
  if (block_logits_.size() < rows) block_logits_.resize(rows);
  tree_tokens_.clear();
  model_->forward_tree(tokens, parents, ctx_, *pool_, block_logits_.data());
  tree_tokens_.assign(tokens.begin(), tokens.end());
  return {block_logits_.data(), rows};
}

void Session::accept_tree(std::span<const int> path) {
  if (tree_tokens_.empty()) fail_as(ErrorCode::InvalidArgument, "tree accept: no tree verified");
  model_->commit_tree(path, ctx_);
  for (int node : path) cached_.push_back(tree_tokens_[static_cast<size_t>(node)]);
  tree_tokens_.clear();
}

void Session::rollback(size_t n) {
  if (n > cached_.size()) fail_as(ErrorCode::InvalidArgument, "rollback to ", n, " tokens but ", cached_.size(), " are cached");
  ctx_.cache.truncate(static_cast<int>(n));
  cached_.resize(n);
  tree_tokens_.clear();
}

void Session::enable_hidden_taps(std::vector<int> layers) {
  const ModelConfig& c = model_->config();
  for (int l : layers)
    if (l < 0 || l >= c.n_layers) fail_as(ErrorCode::InvalidArgument, "hidden-state tap of layer ", l, " but the model has ", c.n_layers);
  // Not cleared: a position's row is written by the forward pass that runs
  // it, so the pages of positions never run are never touched (a cleared
  // buffer for the whole context cost milliseconds of page faults per run).
  taps_ = layers.empty() ? nullptr
                         : std::make_unique_for_overwrite<float[]>(static_cast<size_t>(ctx_.cache.capacity()) * layers.size() * c.dim);
  ctx_.tap_layers = std::move(layers);
  ctx_.tap_out = taps_.get();
  reset();
}

// Positions cached without a forward pass here (a restored state, an adopted
// prefix) have no hidden states: their tap rows are zeros, never the
// buffer's uninitialized contents (a draft conditioned on them drafts
// poorly, verification keeps the output exact).
void Session::zero_taps_of_cached() {
  if (!taps_) return;
  const size_t row = ctx_.tap_layers.size() * static_cast<size_t>(model_->config().dim);
  std::fill(taps_.get(), taps_.get() + cached_.size() * row, 0.0f);
}

const float* Session::hidden_taps(int pos) const {
  if (ctx_.tap_out == nullptr || pos < 0 || pos >= static_cast<int>(cached_.size()))
    fail("hidden_taps: position ", pos, " is not cached or taps are off");
  return taps_.get() + static_cast<size_t>(pos) * ctx_.tap_layers.size() * model_->config().dim;
}

GenerateResult Session::generate(std::span<const int32_t> input, const GenerateOptions& opt,
                                 const std::function<bool(std::string_view)>& on_text) {
  if (opt.max_tokens < 0) fail_as(ErrorCode::InvalidArgument, "max tokens ", opt.max_tokens, " must be >= 0");
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(input.size());
  r.reused_tokens = static_cast<int>(std::min(common_prefix(input), input.size() > 0 ? input.size() - 1 : 0));
  auto t0 = std::chrono::steady_clock::now();
  std::span<float> logits = prefill(input, opt.cancelled, opt.prefill_progress);
  r.prefill_seconds = seconds_since(t0);
  if (logits.empty()) {
    r.stop = GenerateResult::Stop::Cancelled;
    return r;
  }

  Sampler sampler(opt.sampling);
  TextStream stream(*tok_, opt.stop_strings);
  std::vector<int32_t> history(input.begin(), input.end());
  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return true;
    r.text += piece;
    return on_text ? on_text(piece) : true;
  };
  std::optional<constrain::Matcher> matcher;
  if (opt.constraint) {
    matcher.emplace(opt.constraint->matcher());
    r.constraint_used = true;
    // The text must be exactly the bytes the matcher saw: no SentencePiece
    // leading-space stripping at the start of the continuation.
    stream.continue_after(INT32_MAX);
  }
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < opt.max_tokens; ++i) {
    if (matcher && matcher->complete()) {
      r.stop = GenerateResult::Stop::ConstraintEnd;
      break;
    }
    int32_t next;
    if (matcher) {
      float us = 0;
      next = sample_constrained(sampler, *matcher, logits, history, &us);
      r.mask_us.push_back(us);
    } else {
      next = sampler.sample(logits, history);
    }
    if ((opt.stop_at_eos || matcher) && tok_->is_eos(next)) {
      r.stop = GenerateResult::Stop::Eos;
      r.eos_token = next;
      break;
    }
    r.tokens.push_back(next);
    history.push_back(next);
    if (!emit(stream.push(next))) {
      r.stop = GenerateResult::Stop::Callback;
      break;
    }
    if (stream.stopped()) {
      r.stop = GenerateResult::Stop::StopString;
      break;
    }
    if (i + 1 == opt.max_tokens) break;  // no need to run the last sampled token
    if (ctx_.cache.size() >= ctx_.cache.capacity()) {
      r.stop = GenerateResult::Stop::ContextFull;
      break;
    }
    if (opt.cancelled && opt.cancelled()) {
      r.stop = GenerateResult::Stop::Cancelled;
      break;
    }
    model_->forward(std::span<const int32_t>(&next, 1), ctx_, *pool_, logits_.data());
    cached_.push_back(next);
  }
  emit(stream.finish());
  if (matcher) r.constraint_complete = matcher->accepting() && r.stop != GenerateResult::Stop::StopString;
  r.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace pocket
