// Perplexity of a model on a text and, against a reference model on the same
// windows, KL divergence and top-1 agreement: the numbers used to judge a
// quantized model against its full-precision source.
//
// Method (strided windows): the text's tokens are cut into windows of at
// most `ctx` positions that start every `stride` tokens; when the vocabulary
// wants BOS, every window starts with it. Each text token is predicted
// exactly once, in the first window that contains it and has not scored it
// yet. With the default stride of ctx/2 every scored token past the first
// window has at least ctx/2 tokens of context, as in the usual strided
// evaluation of Hugging Face's perplexity guide. The stride is clipped to
// ctx - 1 so that no token is skipped: with BOS that gives disjoint text
// windows, without BOS windows that overlap by one token. Without BOS the
// first text token is never scored (nothing predicts it).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "eval/metrics.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pocket::eval {

struct EvalOptions {
  int ctx = 256;        // window length in tokens, BOS included
  int stride = 0;       // 0 = ctx / 2; clipped to ctx - 1
  int64_t max_tokens = 0;  // 0 = all; otherwise only the first max_tokens text tokens
  int threads = 1;
  bool add_bos = false;  // start every window with bos_id
  int32_t bos_id = -1;
  KVType kv = KVType::F16;  // the evaluated model's KV cache; the reference's is always f16
};

// One window: text tokens [begin, end) run after an optional BOS; targets
// [first_target, end) are scored in it.
struct Window {
  int64_t begin = 0, end = 0, first_target = 0;
};

// The windows for `n_tokens` text tokens (see the method above). Fails with
// pocket::Error when there is nothing to score or the options are invalid.
std::vector<Window> plan_windows(int64_t n_tokens, const EvalOptions& opt);

// The stride plan_windows uses for `opt` (the default resolved and clipped to
// the window's text length).
int plan_stride(const EvalOptions& opt);

struct EvalResult {
  int64_t text_tokens = 0;  // tokens evaluated (after --max-tokens)
  int64_t windows = 0;
  NllSum model;              // the evaluated model's negative log-likelihood
  bool has_reference = false;
  NllSum reference;          // the reference's, on the same positions
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;  // KL(P_ref || P_model) in nats
  double top1_agreement = 0;                   // fraction of positions with equal argmax
  // evaluate_mapped only: the reference renormalised over the model's
  // (kept) tokens, and the probability the reference gives the others.
  bool mapped = false;
  NllSum reference_kept;
  double ref_dropped_mass_mean = 0, ref_dropped_mass_max = 0;
  double chars = 0;  // Unicode characters of the evaluated tokens (set by the caller)
};

// Evaluates `model` (and `reference`, when given, on the same windows) on
// `tokens`. Both models must have the same vocabulary size.
EvalResult evaluate(const Model& model, const Model* reference, std::span<const int32_t> tokens,
                    const EvalOptions& opt);

// A model with a pruned vocabulary against its original (`pocket eval
// --ref-map`): `tokens` are the pruned model's; the reference runs on the
// same sequence, each token mapped to its original id (new_to_old), so both
// see the same text cut the same way and every target is a kept token.
// Per scored position: the model's NLL; the reference's NLL over its full
// vocabulary and renormalised over the kept tokens; KL(P_ref|kept ||
// P_model) over the kept tokens (P_ref|kept: the reference's distribution
// restricted to the kept tokens and renormalised); top-1 agreement (the
// reference's argmax over its full vocabulary is the model's argmax); and
// the reference's probability mass on dropped tokens.
EvalResult evaluate_mapped(const Model& model, const Model& reference, std::span<const int32_t> tokens,
                           std::span<const int32_t> new_to_old, const EvalOptions& opt);

// The text tokens of `text` (no BOS: windows add it). Fails with
// pocket::Error naming `source` when the text gives fewer than two tokens.
std::vector<int32_t> tokenize_for_eval(const Tokenizer& tok, std::string_view text, std::string_view source);

// Fails with pocket::Error unless both tokenizers hold the same tokens in the
// same order and both models the same vocab_size (KL needs a shared vocabulary).
void check_same_vocab(const Model& model, const Tokenizer& model_tok, const Model& reference,
                      const Tokenizer& reference_tok);

}  // namespace pocket::eval
