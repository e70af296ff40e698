// An independent float64 reference of the DFlash and DFlash2 draft forward,
// written from the formats' description (z-lab's DFlash and DFlash2 model
// code), for the DFlash tests: it reads the fixture's own float weights, not
// Pocket's loader.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dflash_fixture.h"
#include "kernels/kernels.h"
#include "runtime/loader.h"
#include "speculative/dflash.h"
#include "speculative/speculative.h"

namespace pocket::test {

using Vec = std::vector<double>;

// out[r] = sum_c W[r][c] x[c], W rows x cols row-major.
inline Vec matvec(const std::vector<float>& W, const Vec& x, size_t rows) {
  const size_t cols = x.size();
  Vec out(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[r] += static_cast<double>(W[r * cols + c]) * x[c];
  return out;
}

inline void rmsnorm(double* x, size_t n, const std::vector<float>& g, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * s * g[i];
}

// Rotates each head's first and second halves (NeoX / Qwen3 style).
inline void rope(double* x, int n_heads, int hd, int pos, double theta) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      const double a = pos * std::pow(theta, -2.0 * i / hd), c = std::cos(a), s = std::sin(a);
      double& x0 = x[h * hd + i];
      double& x1 = x[h * hd + i + hd / 2];
      const double r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
      x0 = r0, x1 = r1;
    }
}

inline std::vector<float> rows_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  TensorView v = t;
  v.shape = {t.rows(), t.cols()};
  for (int64_t r = 0; r < v.rows(); ++r) kernels::dequant_row(v, r, out.data() + r * v.cols());
  return out;
}

// DFlash2's convolution of a block's rows xs on `side`, with coefficients
// dyn[i] = kernel_projection(the sublayer's normed input at row i), laid out
// [side][tap][group]: y[i][c] = sum_{t <= i, t < K} (base[side][t][c] + dyn[i][side][t][c / group]) * xs[i-t][c].
inline std::vector<Vec> conv_ref(const Draft& d, const std::string& conv, const std::vector<Vec>& xs,
                                 const std::vector<Vec>& dyn, int side) {
  const auto& base = d.get(conv + "base_kernel");
  const size_t H = xs[0].size(), K = static_cast<size_t>(d.conv_kernel), G = H / static_cast<size_t>(d.conv_group);
  std::vector<Vec> out(xs.size(), Vec(H, 0.0));
  for (size_t i = 0; i < xs.size(); ++i)
    for (size_t t = 0; t < K && t <= i; ++t)
      for (size_t c = 0; c < H; ++c) {
        const double w = base[(side * K + t) * H + c] + dyn[i][(side * K + t) * G + c / static_cast<size_t>(d.conv_group)];
        out[i][c] += w * xs[i - t][c];
      }
  return out;
}

struct ReferenceBlock {
  std::vector<Vec> logits;  // block rows 1..B-1, after output_multiplier / softcapping
  std::vector<Vec> hidden;  // the same rows' final-normed hidden states
};

// The draft's logits for block rows 1..B-1 from the format's description:
// context = hidden_norm(fc(concat of taps)); the block [anchor, mask x (B-1)]
// embedded by the target; per layer queries from the block, keys/values
// from [context; block] through the same k/v projections, per-head q/k
// norms, RoPE at positions 0..a+B-1, no causal mask; Qwen3 MLP; DFlash2's
// convolutions around attention and the MLP; final norm, then the target's
// head.
inline ReferenceBlock reference_block(const Draft& d, const LoadedModel& m, const std::vector<std::vector<float>>& taps,
                                      int32_t anchor) {
  const ModelConfig& t = m.model->config();
  const int H = t.dim, a = static_cast<int>(taps.size()), B = d.block, hd = d.hd, group = d.heads / d.kv_heads;
  const size_t qd = static_cast<size_t>(d.heads) * hd, kvd = static_cast<size_t>(d.kv_heads) * hd, Bs = static_cast<size_t>(B);
  const size_t dyn_rows = d.conv_kernel > 0 ? static_cast<size_t>(2 * d.conv_kernel * (H / d.conv_group)) : 0;
  const double eps = 1e-6, theta = 1e6;
  const auto emb = rows_f32(m.file->get("token_embd.weight"));
  std::vector<Vec> ctx;
  for (const auto& tap : taps) {
    Vec c = matvec(d.get("fc.weight"), Vec(tap.begin(), tap.end()), static_cast<size_t>(H));
    rmsnorm(c.data(), c.size(), d.get("hidden_norm.weight"), eps);
    ctx.push_back(c);
  }
  std::vector<Vec> h(Bs);
  for (int i = 0; i < B; ++i) {
    const int32_t id = i == 0 ? anchor : d.mask;
    h[static_cast<size_t>(i)].assign(emb.begin() + static_cast<ptrdiff_t>(id) * H, emb.begin() + static_cast<ptrdiff_t>(id + 1) * H);
  }
  auto normed = [&](const std::string& gain) {
    std::vector<Vec> xs = h;
    for (auto& x : xs) rmsnorm(x.data(), x.size(), d.get(gain), eps);
    return xs;
  };
  for (int l = 0; l < d.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    // A sublayer f with DFlash2's convolutions on both sides (none for DFlash).
    auto sublayer = [&](const std::string& norm, const std::string& conv, auto f) {
      std::vector<Vec> xs = normed(p + norm), dyn;
      if (d.conv_kernel > 0) {
        for (const Vec& x : xs) dyn.push_back(matvec(d.get(p + conv + "kernel_projection.weight"), x, dyn_rows));
        xs = conv_ref(d, p + conv, xs, dyn, 0);
      }
      std::vector<Vec> ys = f(xs);
      if (d.conv_kernel > 0) ys = conv_ref(d, p + conv, ys, dyn, 1);
      for (size_t i = 0; i < Bs; ++i)
        for (int e = 0; e < H; ++e) h[i][static_cast<size_t>(e)] += ys[i][static_cast<size_t>(e)];
    };
    sublayer("input_layernorm.weight", "attention_conv.", [&](const std::vector<Vec>& xs) {
      std::vector<Vec> q(Bs), k, v;  // k, v: context then block
      auto key_value = [&](const Vec& x, int pos) {
        Vec kk = matvec(d.get(p + "self_attn.k_proj.weight"), x, kvd);
        for (int g = 0; g < d.kv_heads; ++g) rmsnorm(kk.data() + g * hd, static_cast<size_t>(hd), d.get(p + "self_attn.k_norm.weight"), eps);
        rope(kk.data(), d.kv_heads, hd, pos, theta);
        k.push_back(kk);
        v.push_back(matvec(d.get(p + "self_attn.v_proj.weight"), x, kvd));
      };
      for (int i = 0; i < a; ++i) key_value(ctx[static_cast<size_t>(i)], i);
      for (int i = 0; i < B; ++i) {
        Vec& qi = q[static_cast<size_t>(i)];
        qi = matvec(d.get(p + "self_attn.q_proj.weight"), xs[static_cast<size_t>(i)], qd);
        for (int g = 0; g < d.heads; ++g) rmsnorm(qi.data() + g * hd, static_cast<size_t>(hd), d.get(p + "self_attn.q_norm.weight"), eps);
        rope(qi.data(), d.heads, hd, a + i, theta);
        key_value(xs[static_cast<size_t>(i)], a + i);
      }
      std::vector<Vec> out;
      for (int i = 0; i < B; ++i) {
        Vec o(qd, 0.0);
        for (int g = 0; g < d.heads; ++g) {
          const size_t kvo = static_cast<size_t>(g / group) * hd;
          Vec s(k.size());
          double mx = -1e300;
          for (size_t j = 0; j < k.size(); ++j) {
            double dot = 0;
            for (int e = 0; e < hd; ++e) dot += q[static_cast<size_t>(i)][static_cast<size_t>(g * hd + e)] * k[j][kvo + e];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (auto& x : s) z += (x = std::exp(x - mx));
          for (size_t j = 0; j < k.size(); ++j)
            for (int e = 0; e < hd; ++e) o[static_cast<size_t>(g * hd + e)] += s[j] / z * v[j][kvo + e];
        }
        out.push_back(matvec(d.get(p + "self_attn.o_proj.weight"), o, static_cast<size_t>(H)));
      }
      return out;
    });
    sublayer("post_attention_layernorm.weight", "mlp_conv.", [&](const std::vector<Vec>& xs) {
      std::vector<Vec> out;
      for (const Vec& x : xs) {
        Vec g = matvec(d.get(p + "mlp.gate_proj.weight"), x, static_cast<size_t>(d.ffn));
        const Vec u = matvec(d.get(p + "mlp.up_proj.weight"), x, static_cast<size_t>(d.ffn));
        for (size_t e = 0; e < g.size(); ++e) g[e] = g[e] / (1.0 + std::exp(-g[e])) * u[e];
        out.push_back(matvec(d.get(p + "mlp.down_proj.weight"), g, static_cast<size_t>(H)));
      }
      return out;
    });
  }
  const auto& out_t = t.tied_embeddings ? m.file->get("token_embd.weight") : m.file->get("output.weight");
  const auto head = rows_f32(out_t);
  ReferenceBlock r;
  const std::vector<Vec> xs = normed("norm.weight");
  for (int i = 1; i < B; ++i) {
    Vec z = matvec(head, xs[static_cast<size_t>(i)], static_cast<size_t>(t.vocab_size));
    for (double& v : z) {
      v *= d.output_multiplier;
      if (d.softcap > 0) v = d.softcap * std::tanh(v / d.softcap);
    }
    r.logits.push_back(z);
    r.hidden.push_back(xs[static_cast<size_t>(i)]);
  }
  return r;
}

inline std::vector<Vec> reference_logits(const Draft& d, const LoadedModel& m, const std::vector<std::vector<float>>& taps,
                                         int32_t anchor) {
  return reference_block(d, m, taps, anchor).logits;
}

// DFlash2's candidate selector on the reference block: per row the top-k
// logits, each rescored by predecessor[prev] * hidden_projection(hidden) .
// successor[candidate], the best drafted and made prev (the anchor first).
// margins[i] gets row i's gap between the best score and the next
// contender's (the second best, and the first token outside the top-k when
// it ties the k-th logit within 0.01): a near tie could go either way.
inline std::vector<int32_t> reference_select(const Draft& d, const ReferenceBlock& r, int32_t anchor,
                                             std::vector<double>& margins) {
  const auto& pred = d.get("candidate_selector.predecessor_codebook");
  const auto& succ = d.get("candidate_selector.successor_codebook");
  const size_t R = static_cast<size_t>(d.sel_rank), k = static_cast<size_t>(d.sel_top_k);
  std::vector<int32_t> out;
  margins.clear();
  int32_t prev = anchor;
  for (size_t i = 0; i < r.logits.size(); ++i) {
    const Vec& z = r.logits[i];
    std::vector<int32_t> ids(z.size());
    for (size_t j = 0; j < ids.size(); ++j) ids[j] = static_cast<int32_t>(j);
    std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) { return z[static_cast<size_t>(x)] > z[static_cast<size_t>(y)]; });
    const Vec proj = matvec(d.get("candidate_selector.hidden_projection.weight"), r.hidden[i], R);
    auto score = [&](int32_t tok) {
      double s = z[static_cast<size_t>(tok)];
      for (size_t q = 0; q < R; ++q)
        s += static_cast<double>(pred[static_cast<size_t>(prev) * R + q]) * proj[q] * succ[static_cast<size_t>(tok) * R + q];
      return s;
    };
    std::vector<std::pair<double, int32_t>> scored;
    for (size_t j = 0; j < k; ++j) scored.emplace_back(score(ids[j]), ids[j]);
    std::sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    double margin = scored.size() > 1 ? scored[0].first - scored[1].first : 1e300;
    if (k < ids.size() && z[static_cast<size_t>(ids[k - 1])] - z[static_cast<size_t>(ids[k])] < 0.01)
      margin = std::min(margin, scored[0].first - score(ids[k]));
    margins.push_back(margin);
    prev = scored[0].second;
    out.push_back(prev);
  }
  return out;
}

// The target's taps at positions [0, n) in the format's terms: the state
// after the last layer is the final-normed one.
inline std::vector<std::vector<float>> format_taps(Session& s, const LoadedModel& m, int n) {
  const ModelConfig& c = m.model->config();
  const auto norm = rows_f32(m.file->get("output_norm.weight"));
  std::vector<std::vector<float>> taps;
  for (int p = 0; p < n; ++p) {
    const float* t = s.hidden_taps(p);
    std::vector<float> row(t, t + 2 * c.dim);
    Vec last(row.begin() + c.dim, row.end());
    rmsnorm(last.data(), last.size(), norm, c.norm_eps);
    std::copy(last.begin(), last.end(), row.begin() + c.dim);
    taps.push_back(row);
  }
  return taps;
}

// The draft's block logits after each history (prefilled by the target
// but for its last token, the anchor), concatenated.
inline std::vector<float> draft_logits(const LoadedModel& m, Session& s, const std::string& path,
                                const std::vector<std::vector<int32_t>>& histories) {
  DFlashDrafter drafter(std::make_shared<const DFlashDraft>(path, m.model->config()), s);
  std::vector<float> all;
  for (const auto& hist : histories) {
    s.reset();
    s.prefill(std::span<const int32_t>(hist.data(), hist.size() - 1));
    const auto& l = drafter.block_logits(hist);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

// Greedy speculative output with `drafter` equals plain greedy decoding
// (tokens and text) on `prompts` random prompts (seeds from `seed`), at
// blocks of 1 and 4 tokens; returns the tokens drafted.
inline int expect_greedy_as_plain(Session& s, Drafter& drafter, int prompts, uint64_t seed) {
  GenerateOptions o;
  o.max_tokens = 24;
  o.sampling.temperature = 0;
  int drafted = 0;
  for (int i = 0; i < prompts; ++i) {
    const auto in = prompt_tokens(3 + 4 * i, seed + static_cast<uint64_t>(i));
    s.reset();
    const auto want = s.generate(in, o);
    for (int k : {1, 4}) {
      SpeculativeStats st;
      s.reset();
      const auto got = generate_speculative(s, drafter, in, o, {k, false}, {}, &st);
      EXPECT_EQ(got.tokens, want.tokens) << "prompt " << i << " k=" << k;
      EXPECT_EQ(got.text, want.text);
      drafted += st.drafted;
    }
  }
  return drafted;
}

}  // namespace pocket::test
