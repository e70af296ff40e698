#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket::eval {

namespace {

// Window length in text tokens (BOS takes one position).
int64_t text_per_window(const EvalOptions& opt) { return opt.ctx - (opt.add_bos ? 1 : 0); }

// Runs one window through `m` and leaves tokens.size() x vocab logits in `out`.
void run_window(const Model& m, Context& ctx, ThreadPool& pool, std::span<const int32_t> seq, std::vector<float>& out) {
  out.resize(seq.size() * static_cast<size_t>(m.config().vocab_size));
  ctx.cache.clear();
  m.forward(seq, ctx, pool, out.data(), /*all_logits=*/true);
}

void check_fits(const Model& m, int ctx, const char* which) {
  if (ctx > m.config().max_seq_len)
    fail("--ctx ", ctx, " exceeds the ", which, " model's context length ", m.config().max_seq_len);
}

// KL mean, max and p99 over the scored positions and the top-1 agreement.
void summarize_kl(std::vector<double> kls, int64_t agree, EvalResult& r) {
  double sum = 0;
  for (double v : kls) sum += v;
  r.kl_mean = sum / static_cast<double>(kls.size());
  r.kl_max = *std::max_element(kls.begin(), kls.end());
  r.kl_p99 = quantile(std::move(kls), 0.99);
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.model.count);
}

}  // namespace

int plan_stride(const EvalOptions& opt) {
  // At most ctx - 1: consecutive windows then overlap by the one token whose
  // logits predict the next window's first scored token (or, with BOS, the
  // BOS slot takes that role), so no token goes unscored.
  const int most = std::max(1, opt.ctx - 1);
  return std::min(most, opt.stride > 0 ? opt.stride : std::max(1, opt.ctx / 2));
}

std::vector<Window> plan_windows(int64_t n_tokens, const EvalOptions& opt) {
  if (opt.add_bos && opt.bos_id < 0) fail("evaluation: BOS requested but the vocabulary has no BOS token");
  const int64_t per_window = text_per_window(opt);
  const int64_t min_ctx = 2;  // room for one prediction per window
  if (opt.ctx < min_ctx || per_window < 1) fail("--ctx ", opt.ctx, " is too small (at least ", min_ctx, ")");
  if (opt.stride < 0) fail("--stride ", opt.stride, " is negative");
  const int64_t stride = plan_stride(opt);
  const int64_t predicts_from = opt.add_bos ? 0 : 1;  // without BOS nothing predicts the first token
  if (n_tokens - predicts_from < 1)
    fail("the text has ", n_tokens, " token(s): nothing to predict (need at least 2 tokens)");

  std::vector<Window> windows;
  int64_t next_target = predicts_from;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + per_window, n_tokens);
    const int64_t first = std::max(next_target, begin + predicts_from);
    if (first < end) windows.push_back({begin, end, first});
    next_target = std::max(next_target, end);
    if (end == n_tokens) break;
  }
  return windows;
}

EvalResult evaluate(const Model& model, const Model* reference, std::span<const int32_t> tokens,
                    const EvalOptions& opt) {
  if (opt.max_tokens < 0) fail("--max-tokens ", opt.max_tokens, " is negative");
  if (opt.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > opt.max_tokens)
    tokens = tokens.first(static_cast<size_t>(opt.max_tokens));
  const std::vector<Window> windows = plan_windows(static_cast<int64_t>(tokens.size()), opt);
  check_fits(model, opt.ctx, "evaluated");
  if (reference) {
    check_fits(*reference, opt.ctx, "reference");
    if (reference->config().vocab_size != model.config().vocab_size)
      fail("the models do not share a vocabulary: vocab_size ", model.config().vocab_size, " vs the reference's ",
           reference->config().vocab_size);
  }
  if (opt.threads < 1) fail("--threads ", opt.threads, " must be at least 1");

  ThreadPool pool(opt.threads);
  Context model_ctx(model.config(), opt.ctx, opt.kv);
  std::unique_ptr<Context> ref_ctx = reference ? std::make_unique<Context>(reference->config(), opt.ctx) : nullptr;
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  const int64_t offset = opt.add_bos ? 1 : 0;  // sequence position of text token `begin`

  EvalResult r;
  r.text_tokens = static_cast<int64_t>(tokens.size());
  r.windows = static_cast<int64_t>(windows.size());
  r.has_reference = reference != nullptr;
  std::vector<int32_t> seq;
  std::vector<float> logits, ref_logits;
  std::vector<double> kls;
  int64_t agree = 0;
  for (const Window& w : windows) {
    seq.clear();
    if (opt.add_bos) seq.push_back(opt.bos_id);
    seq.insert(seq.end(), tokens.begin() + w.begin, tokens.begin() + w.end);
    run_window(model, model_ctx, pool, seq, logits);
    if (reference) run_window(*reference, *ref_ctx, pool, seq, ref_logits);
    for (int64_t j = w.first_target; j < w.end; ++j) {
      const size_t row = static_cast<size_t>(offset + (j - w.begin) - 1);  // the position that predicts token j
      const size_t target = static_cast<size_t>(tokens[static_cast<size_t>(j)]);
      std::span<const float> p(logits.data() + row * vocab, vocab);
      r.model.add(log_sum_exp(p) - p[target]);
      if (!reference) continue;
      std::span<const float> q(ref_logits.data() + row * vocab, vocab);
      r.reference.add(log_sum_exp(q) - q[target]);
      kls.push_back(kl_divergence(q, p));
      agree += argmax(q) == argmax(p);
    }
  }
  if (reference && !kls.empty()) {
    summarize_kl(std::move(kls), agree, r);
  }
  return r;
}

EvalResult evaluate_mapped(const Model& model, const Model& reference, std::span<const int32_t> tokens,
                           std::span<const int32_t> new_to_old, const EvalOptions& opt) {
  if (opt.max_tokens < 0) fail("--max-tokens ", opt.max_tokens, " is negative");
  if (opt.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > opt.max_tokens)
    tokens = tokens.first(static_cast<size_t>(opt.max_tokens));
  const std::vector<Window> windows = plan_windows(static_cast<int64_t>(tokens.size()), opt);
  check_fits(model, opt.ctx, "evaluated");
  check_fits(reference, opt.ctx, "reference");
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  const size_t ref_vocab = static_cast<size_t>(reference.config().vocab_size);
  if (new_to_old.size() != vocab)
    fail("the id map has ", new_to_old.size(), " kept tokens, the model's vocab_size is ", vocab);
  for (int32_t o : new_to_old)
    if (o < 0 || static_cast<size_t>(o) >= ref_vocab)
      fail("the id map names token ", o, ", outside the reference's vocabulary (", ref_vocab, ")");
  if (opt.threads < 1) fail("--threads ", opt.threads, " must be at least 1");

  ThreadPool pool(opt.threads);
  Context model_ctx(model.config(), opt.ctx, opt.kv), ref_ctx(reference.config(), opt.ctx);
  const int64_t offset = opt.add_bos ? 1 : 0;
  EvalResult r;
  r.mapped = true;
  r.has_reference = true;
  r.text_tokens = static_cast<int64_t>(tokens.size());
  r.windows = static_cast<int64_t>(windows.size());
  std::vector<int32_t> seq, ref_seq;
  std::vector<float> logits, ref_logits, kept(vocab);
  std::vector<double> kls;
  int64_t agree = 0;
  double dropped_sum = 0;
  for (const Window& w : windows) {
    seq.clear();
    if (opt.add_bos) seq.push_back(opt.bos_id);
    seq.insert(seq.end(), tokens.begin() + w.begin, tokens.begin() + w.end);
    ref_seq.clear();
    for (int32_t id : seq) {
      if (id < 0 || static_cast<size_t>(id) >= vocab) fail("token ", id, " is outside the model's vocabulary");
      ref_seq.push_back(new_to_old[static_cast<size_t>(id)]);
    }
    run_window(model, model_ctx, pool, seq, logits);
    run_window(reference, ref_ctx, pool, ref_seq, ref_logits);
    for (int64_t j = w.first_target; j < w.end; ++j) {
      const size_t row = static_cast<size_t>(offset + (j - w.begin) - 1);
      const size_t target = static_cast<size_t>(tokens[static_cast<size_t>(j)]);
      std::span<const float> p(logits.data() + row * vocab, vocab);
      std::span<const float> q(ref_logits.data() + row * ref_vocab, ref_vocab);
      for (size_t k = 0; k < vocab; ++k) kept[k] = q[static_cast<size_t>(new_to_old[k])];
      const double lse_q = log_sum_exp(q), lse_kept = log_sum_exp(kept);
      r.model.add(log_sum_exp(p) - p[target]);
      r.reference.add(lse_q - kept[target]);
      r.reference_kept.add(lse_kept - kept[target]);
      kls.push_back(kl_divergence(kept, p));
      agree += argmax(q) == new_to_old[static_cast<size_t>(argmax(p))];
      const double dropped = std::max(0.0, 1.0 - std::exp(lse_kept - lse_q));
      dropped_sum += dropped;
      r.ref_dropped_mass_max = std::max(r.ref_dropped_mass_max, dropped);
    }
  }
  if (!kls.empty()) {
    summarize_kl(std::move(kls), agree, r);
    r.ref_dropped_mass_mean = dropped_sum / static_cast<double>(r.model.count);
  }
  return r;
}

std::vector<int32_t> tokenize_for_eval(const Tokenizer& tok, std::string_view text, std::string_view source) {
  if (text.empty()) fail(source, ": the evaluation text is empty");
  std::vector<int32_t> ids = tok.encode(text);
  if (ids.size() < 2)
    fail(source, ": the evaluation text gives ", ids.size(), " token(s); at least 2 are needed to score a prediction");
  return ids;
}

void check_same_vocab(const Model& model, const Tokenizer& model_tok, const Model& reference,
                      const Tokenizer& reference_tok) {
  const int a = model.config().vocab_size, b = reference.config().vocab_size;
  if (a != b) fail("the models do not share a vocabulary: vocab_size ", a, " vs the reference's ", b);
  const auto& ta = model_tok.vocab().tokens;
  const auto& tb = reference_tok.vocab().tokens;
  if (ta.size() != tb.size())
    fail("the models do not share a vocabulary: the tokenizers have ", ta.size(), " and ", tb.size(), " tokens");
  for (size_t i = 0; i < ta.size(); ++i)
    if (ta[i] != tb[i]) fail("the models do not share a vocabulary: token ", i, " differs between the tokenizers");
}

}  // namespace pocket::eval
