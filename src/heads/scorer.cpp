#include "heads/scorer.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::heads {

namespace {

// log softmax(row)[id], in double.
double log_prob(const float* row, int vocab, int32_t id) {
  float mx = row[0];
  for (int j = 1; j < vocab; ++j) mx = std::max(mx, row[j]);
  double se = 0;
  for (int j = 0; j < vocab; ++j) se += std::exp(static_cast<double>(row[j] - mx));
  return row[id] - mx - std::log(se);
}

}  // namespace

std::vector<ContinuationScore> score_continuations(const Model& model, Context& ctx, ThreadPool& pool,
                                                   std::span<const int32_t> prefix,
                                                   const std::vector<std::vector<int32_t>>& continuations,
                                                   bool share_prefix) {
  if (prefix.empty()) fail("scoring needs a non-empty prefix (the prompt or query)");
  const int vocab = model.config().vocab_size;
  const int q = static_cast<int>(prefix.size());
  std::vector<ContinuationScore> out(continuations.size());
  std::vector<float> last(static_cast<size_t>(vocab)), rows;
  if (share_prefix) {
    ctx.cache.clear();
    model.forward(prefix, ctx, pool, last.data());
  }
  if (share_prefix && model.packable()) {  // packed: groups of at most 64 rows of logits
    for (size_t c = 0; c < continuations.size(); ++c) {
      if (continuations[c].empty()) fail("candidate ", c + 1, " has no tokens");
      for (int32_t t : continuations[c])
        if (t < 0 || t >= vocab) fail("token id ", t, " is outside the vocabulary (", vocab, ")");
    }
    for_each_packed_group(q, continuations, ctx.cache.capacity(), 64, true, [&](size_t begin, size_t end) {
      const PackedCandidates p = pack_after_prefix(model.config(), ctx.cache, q, continuations, begin, end, true);
      rows.resize(p.tokens.size() * static_cast<size_t>(vocab));
      if (!p.tokens.empty()) model.forward_packed(p.tokens, p.view(), ctx, pool, nullptr, rows.data());
      size_t row = 0;
      for (size_t k = begin; k < end; ++k) {
        const std::vector<int32_t>& cont = continuations[k];
        ContinuationScore& s = out[k];
        s.tokens = static_cast<int>(cont.size());
        s.logprob = log_prob(last.data(), vocab, cont[0]);
        for (size_t j = 1; j < cont.size(); ++j) s.logprob += log_prob(rows.data() + (row + j - 1) * vocab, vocab, cont[j]);
        row += static_cast<size_t>(p.rows[k - begin]);
      }
    });
    return out;
  }
  for (size_t c = 0; c < continuations.size(); ++c) {
    const std::vector<int32_t>& cont = continuations[c];
    const int m = static_cast<int>(cont.size());
    if (m == 0) fail("candidate ", c + 1, " has no tokens");
    for (int32_t t : cont)
      if (t < 0 || t >= vocab) fail("token id ", t, " is outside the vocabulary (", vocab, ")");
    ContinuationScore& s = out[c];
    s.tokens = m;
    if (share_prefix) {
      if (ctx.cache.size() != q) {
        if (q >= ctx.cache.rollback_limit()) {
          ctx.cache.truncate(q);
        } else {
          ctx.cache.clear();
          model.forward(prefix, ctx, pool, last.data());
        }
      }
      s.logprob = log_prob(last.data(), vocab, cont[0]);
      if (m > 1) {  // logits after each continuation token but the last
        rows.resize(static_cast<size_t>(m - 1) * vocab);
        model.forward(std::span<const int32_t>(cont).first(static_cast<size_t>(m - 1)), ctx, pool, rows.data(), true);
        for (int j = 1; j < m; ++j) s.logprob += log_prob(rows.data() + static_cast<size_t>(j - 1) * vocab, vocab, cont[j]);
      }
    } else {
      std::vector<int32_t> all(prefix.begin(), prefix.end());
      all.insert(all.end(), cont.begin(), cont.end() - 1);
      ctx.cache.clear();
      rows.resize(all.size() * static_cast<size_t>(vocab));
      model.forward(all, ctx, pool, rows.data(), true);
      for (int j = 0; j < m; ++j) s.logprob += log_prob(rows.data() + static_cast<size_t>(q - 1 + j) * vocab, vocab, cont[j]);
    }
  }
  return out;
}

std::vector<Ranked> sort_ranked(const std::vector<double>& scores) {
  std::vector<Ranked> r(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) r[i] = {static_cast<int>(i), scores[i]};
  std::stable_sort(r.begin(), r.end(), [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
  return r;
}

Scorer::Scorer(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tok, int threads, int max_tokens)
    : tok_(std::move(tok)), max_tokens_(max_tokens), runner_(std::move(model), threads, max_tokens) {
  if (max_tokens < 2) fail("the scorer's context must hold at least 2 tokens");
}

std::vector<float> Scorer::features(const std::string& text, const FeatureSpec& spec) {
  if (spec.kind == FeatureSpec::Kind::Hidden && spec.layer >= model().config().n_layers)
    fail("the head reads layer ", spec.layer, " but the model has layers 0..", model().config().n_layers - 1);
  Example e;
  e.text = text;
  std::vector<int32_t> ids = encode_input(*tok_, e, spec, max_tokens_);
  std::vector<float> f(static_cast<size_t>(runner_.dim(spec)));
  runner_.features(ids, spec, f.data());
  return f;
}

Prediction Scorer::classify(const Head& head, const std::string& text) {
  if (head.feature_dim() != runner_.dim(head.features))
    fail("head '", head.name, "' reads ", head.feature_dim(), " features but the model's hidden size is ", runner_.dim());
  Prediction p;
  Example e;
  e.text = text;
  p.tokens = static_cast<int>(encode_input(*tok_, e, head.features, max_tokens_).size());
  std::vector<float> f = features(text, head.features);
  p.probs = head.probabilities(f.data());
  p.index = static_cast<int>(std::max_element(p.probs.begin(), p.probs.end()) - p.probs.begin());
  p.probability = p.probs[static_cast<size_t>(p.index)];
  p.label = head.labels[static_cast<size_t>(p.index)];
  return p;
}

Prediction Scorer::route(const Head& head, const std::string& text, float threshold) {
  Prediction p = classify(head, text);
  const float t = threshold >= 0 ? threshold : head.threshold;
  if (p.probability < t) {
    p.out_of_scope = true;
    p.index = -1;
    p.label = head.other_label;
  }
  return p;
}

std::vector<int32_t> Scorer::prompt_tokens(const std::string& tmpl, const std::string& text) const {
  EncodeOptions eo;
  eo.add_bos = tok_->vocab().add_bos;
  std::vector<int32_t> ids = tok_->encode(apply_template(tmpl, text), eo);
  if (ids.empty()) fail("the prompt has no tokens");
  return ids;
}

std::vector<int32_t> Scorer::continuation_tokens(const std::string& prompt_text, const std::vector<int32_t>& prompt,
                                                 const std::string& cont) const {
  EncodeOptions eo;
  eo.add_bos = tok_->vocab().add_bos;
  std::vector<int32_t> full = tok_->encode(prompt_text + cont, eo);
  if (full.size() > prompt.size() && std::equal(prompt.begin(), prompt.end(), full.begin()))
    return {full.begin() + static_cast<std::ptrdiff_t>(prompt.size()), full.end()};
  return tok_->encode(cont);
}

Prediction Scorer::zero_shot(const std::string& text, const std::vector<std::string>& labels, const std::string& tmpl,
                             const std::vector<std::string>& verbalisations) {
  if (labels.size() < 2) fail("zero-shot classification needs at least two labels");
  if (!verbalisations.empty() && verbalisations.size() != labels.size())
    fail(verbalisations.size(), " verbalisations for ", labels.size(), " labels");
  const std::string prompt_text = apply_template(tmpl, text);
  std::vector<int32_t> prompt = prompt_tokens(tmpl, text);
  std::vector<std::vector<int32_t>> conts;
  for (size_t i = 0; i < labels.size(); ++i) {
    conts.push_back(continuation_tokens(prompt_text, prompt, verbalisations.empty() ? " " + labels[i] : verbalisations[i]));
    if (conts.back().empty()) fail("label '", labels[i], "' has no tokens");
  }
  size_t longest = 0;
  for (const auto& c : conts) longest = std::max(longest, c.size());
  if (prompt.size() + longest > static_cast<size_t>(max_tokens_))
    prompt.erase(prompt.begin() + (tok_->vocab().add_bos ? 1 : 0),
                 prompt.begin() + static_cast<std::ptrdiff_t>(prompt.size() + longest - max_tokens_ + (tok_->vocab().add_bos ? 1 : 0)));
  auto scores = score_continuations(model(), runner_.context(), runner_.pool(), prompt, conts, true);
  Prediction p;
  p.tokens = static_cast<int>(prompt.size());
  p.probs.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) p.probs[i] = static_cast<float>(scores[i].mean());
  softmax(p.probs.data(), static_cast<int>(labels.size()));
  p.index = static_cast<int>(std::max_element(p.probs.begin(), p.probs.end()) - p.probs.begin());
  p.probability = p.probs[static_cast<size_t>(p.index)];
  p.label = labels[static_cast<size_t>(p.index)];
  return p;
}

std::vector<Ranked> Scorer::rank_loglik(const std::string& query, const std::vector<std::string>& candidates,
                                        const std::string& tmpl, bool share_prefix) {
  if (candidates.empty()) fail("nothing to rank: no candidates");
  const std::string prompt_text = apply_template(tmpl, query);
  std::vector<int32_t> prompt = prompt_tokens(tmpl, query);
  std::vector<std::vector<int32_t>> conts;
  for (const std::string& c : candidates) {
    const bool spaced = c.empty() || c[0] == ' ' || c[0] == '\n' || prompt_text.empty() || prompt_text.back() == ' ' ||
                        prompt_text.back() == '\n';
    conts.push_back(continuation_tokens(prompt_text, prompt, spaced ? c : " " + c));
    if (conts.back().empty()) fail("candidate '", c.substr(0, 40), "' has no tokens");
    if (prompt.size() + conts.back().size() > static_cast<size_t>(max_tokens_))
      fail("query + candidate '", c.substr(0, 40), "' need ", prompt.size() + conts.back().size(),
           " tokens; the context holds ", max_tokens_);
  }
  auto s = score_continuations(model(), runner_.context(), runner_.pool(), prompt, conts, share_prefix);
  std::vector<double> scores;
  for (const auto& x : s) scores.push_back(x.mean());
  return sort_ranked(scores);
}

std::vector<Ranked> Scorer::rank_head(const Head& head, const std::string& query, const std::vector<std::string>& candidates,
                                      const std::string& positive, bool share_prefix) {
  if (candidates.empty()) fail("nothing to rank: no candidates");
  if (head.feature_dim() != runner_.dim(head.features))
    fail("head '", head.name, "' reads ", head.feature_dim(), " features but the model's hidden size is ", runner_.dim());
  int pos = head.classes() - 1;
  if (!positive.empty()) {
    auto it = std::find(head.labels.begin(), head.labels.end(), positive);
    if (it == head.labels.end()) fail("head '", head.name, "' has no label '", positive, "'");
    pos = static_cast<int>(it - head.labels.begin());
  }
  // The same tokens encode_input builds for a training pair.
  Example e;
  e.query = query;
  std::vector<std::vector<int32_t>> conts;
  std::vector<int32_t> prefix;
  for (const std::string& c : candidates) {
    e.text = c;
    size_t split = 0;
    std::vector<int32_t> ids = encode_input(*tok_, e, head.features, max_tokens_, &split);
    std::vector<int32_t> p(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
    if (prefix.empty() || p.size() < prefix.size()) prefix = p;  // the shortest truncation of the query is shared
    conts.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
  }
  const int d = runner_.dim(head.features);
  std::vector<float> f(conts.size() * static_cast<size_t>(d));
  if (share_prefix && head.features.kind == FeatureSpec::Kind::Hidden) {
    runner_.features_after(prefix, conts, head.features, f.data());
  } else {
    for (size_t c = 0; c < conts.size(); ++c) {  // the plain path: one full prefill per candidate
      std::vector<int32_t> all = prefix;
      all.insert(all.end(), conts[c].begin(), conts[c].end());
      runner_.features(all, head.features, f.data() + c * d, prefix.size());
    }
  }
  std::vector<double> scores;
  for (size_t c = 0; c < conts.size(); ++c) scores.push_back(head.probabilities(f.data() + c * d)[static_cast<size_t>(pos)]);
  return sort_ranked(scores);
}

}  // namespace pocket::heads
