#include "model/reference_model.h"

#include <cmath>
#include <numbers>

#include "kernels/kernels.h"
#include "util/error.h"

namespace pocket {

namespace {

std::vector<float> to_f32(const TensorView& tensor) {
  TensorView t = tensor;
  if (t.shape.size() == 1) t.shape = {1, t.shape[0]};  // vectors as 1 x n matrices
  std::vector<float> out(static_cast<size_t>(t.numel()));
  int64_t cols = t.cols();
  for (int64_t r = 0; r < t.rows(); ++r) kernels::dequant_row(t, r, out.data() + r * cols);
  return out;
}

std::vector<float> load(const ModelFile& f, const std::string& name) { return to_f32(f.get(name)); }

// y[rows] = W[rows][cols] * x[cols]
void matvec(std::vector<float>& y, const std::vector<float>& w, const std::vector<float>& x, int rows, int cols) {
  y.assign(rows, 0.0f);
  for (int r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int c = 0; c < cols; ++c) acc += static_cast<double>(w[static_cast<size_t>(r) * cols + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
}

void rmsnorm(float* out, const float* x, const float* w, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// Rotates one head in place. Halves style pairs (i, i + d/2); Adjacent style
// pairs (2i, 2i + 1). Frequency index i in both cases.
void rope(float* head, int d, int pos, float theta, RopeStyle style) {
  for (int i = 0; i < d / 2; ++i) {
    double freq = std::pow(static_cast<double>(theta), -2.0 * i / d);
    double angle = pos * freq;
    float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    int a = style == RopeStyle::Halves ? i : 2 * i;
    int b = style == RopeStyle::Halves ? i + d / 2 : 2 * i + 1;
    float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
}

}  // namespace

ReferenceModel::ReferenceModel(const ModelFile& file) : cfg_(file.config) {
  embedding_ = load(file, "token_embd.weight");
  output_norm_ = load(file, "output_norm.weight");
  if (!cfg_.tied_embeddings) output_ = load(file, "output.weight");
  for (int l = 0; l < cfg_.n_layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    L.attn_norm = load(file, p + "attn_norm.weight");
    L.wq = load(file, p + "attn_q.weight");
    L.wk = load(file, p + "attn_k.weight");
    L.wv = load(file, p + "attn_v.weight");
    L.wo = load(file, p + "attn_output.weight");
    if (cfg_.qkv_bias) {
      L.bq = load(file, p + "attn_q.bias");
      L.bk = load(file, p + "attn_k.bias");
      L.bv = load(file, p + "attn_v.bias");
    }
    if (cfg_.qk_norm) {
      L.q_norm = load(file, p + "attn_q_norm.weight");
      L.k_norm = load(file, p + "attn_k_norm.weight");
    }
    if (cfg_.post_norms) {
      L.post_attn_norm = load(file, p + "post_attention_norm.weight");
      L.post_ffn_norm = load(file, p + "post_ffw_norm.weight");
    }
    L.ffn_norm = load(file, p + "ffn_norm.weight");
    L.w_gate = load(file, p + "ffn_gate.weight");
    L.w_up = load(file, p + "ffn_up.weight");
    L.w_down = load(file, p + "ffn_down.weight");
    layers_.push_back(std::move(L));
  }
  k_cache_.resize(cfg_.n_layers);
  v_cache_.resize(cfg_.n_layers);
}

const std::vector<float>& ReferenceModel::forward(int32_t token) {
  const ModelConfig& c = cfg_;
  if (token < 0 || token >= c.vocab_size) fail("token id ", token, " is outside the vocabulary (", c.vocab_size, ")");
  if (pos_ >= c.max_seq_len) fail("context is full (", c.max_seq_len, " tokens)");
  const int dim = c.dim, hd = c.head_dim, kv_dim = c.kv_dim(), q_dim = c.q_dim();
  const int group = c.n_heads / c.n_kv_heads;

  // x = embedding of the token
  std::vector<float> x(embedding_.begin() + static_cast<size_t>(token) * dim,
                       embedding_.begin() + static_cast<size_t>(token + 1) * dim);
  for (float& e : x) e *= c.embed_scale;  // Gemma: sqrt(dim); 1 elsewhere
  std::vector<float> xn(dim), q, k, v, attn(q_dim), o, gate, up, down;

  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    // --- attention block ---
    rmsnorm(xn.data(), x.data(), L.attn_norm.data(), dim, c.norm_eps);
    matvec(q, L.wq, xn, q_dim, dim);
    matvec(k, L.wk, xn, kv_dim, dim);
    matvec(v, L.wv, xn, kv_dim, dim);
    if (c.qkv_bias) {
      for (int i = 0; i < q_dim; ++i) q[i] += L.bq[i];
      for (int i = 0; i < kv_dim; ++i) k[i] += L.bk[i], v[i] += L.bv[i];
    }
    if (c.qk_norm) {  // Qwen3: RMSNorm over each head, before RoPE
      for (int h = 0; h < c.n_heads; ++h) rmsnorm(&q[h * hd], &q[h * hd], L.q_norm.data(), hd, c.norm_eps);
      for (int h = 0; h < c.n_kv_heads; ++h) rmsnorm(&k[h * hd], &k[h * hd], L.k_norm.data(), hd, c.norm_eps);
    }
    const float theta = c.layer_rope_theta(l);  // local (sliding-window) layers have their own base
    for (int h = 0; h < c.n_heads; ++h) rope(&q[h * hd], hd, pos_, theta, c.rope_style);
    for (int h = 0; h < c.n_kv_heads; ++h) rope(&k[h * hd], hd, pos_, theta, c.rope_style);

    // The caches grow by one row per position (the reference keeps f32).
    k_cache_[l].resize(static_cast<size_t>(pos_) * kv_dim);
    v_cache_[l].resize(static_cast<size_t>(pos_) * kv_dim);
    k_cache_[l].insert(k_cache_[l].end(), k.begin(), k.end());
    v_cache_[l].insert(v_cache_[l].end(), v.begin(), v.end());
    const float* kc = k_cache_[l].data();
    const float* vc = v_cache_[l].data();

    // Each query head h attends with KV head h / group (grouped-query
    // attention) to positions [t0, pos]: all of them, or on a local layer the
    // last sliding_window.
    const int t0 = c.is_local(l) ? std::max(0, pos_ - c.sliding_window + 1) : 0;
    const double scale = c.query_scale();
    for (int h = 0; h < c.n_heads; ++h) {
      const float* qh = &q[h * hd];
      int kvh = h / group;
      std::vector<double> scores(pos_ + 1 - t0);
      double max_s = -INFINITY;
      for (int t = t0; t <= pos_; ++t) {
        const float* kt = kc + static_cast<size_t>(t) * kv_dim + kvh * hd;
        double s = 0.0;
        for (int i = 0; i < hd; ++i) s += static_cast<double>(qh[i]) * kt[i];
        scores[t - t0] = s * scale;
        max_s = std::max(max_s, scores[t - t0]);
      }
      double sum = 0.0;
      for (auto& s : scores) sum += (s = std::exp(s - max_s));
      for (int i = 0; i < hd; ++i) {
        double acc = 0.0;
        for (int t = t0; t <= pos_; ++t)
          acc += scores[t - t0] / sum * vc[static_cast<size_t>(t) * kv_dim + kvh * hd + i];
        attn[h * hd + i] = static_cast<float>(acc);
      }
    }
    matvec(o, L.wo, attn, dim, q_dim);
    if (c.post_norms) rmsnorm(o.data(), o.data(), L.post_attn_norm.data(), dim, c.norm_eps);
    for (int i = 0; i < dim; ++i) x[i] += o[i];

    // --- feed-forward block: down(act(gate(x)) * up(x)), act SiLU or tanh-GELU ---
    rmsnorm(xn.data(), x.data(), L.ffn_norm.data(), dim, c.norm_eps);
    matvec(gate, L.w_gate, xn, c.hidden_dim, dim);
    matvec(up, L.w_up, xn, c.hidden_dim, dim);
    for (int i = 0; i < c.hidden_dim; ++i) {
      const double g = gate[i];
      const double act = c.ffn_act == Activation::SiLU
                             ? g / (1.0 + std::exp(-g))
                             : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
      gate[i] = static_cast<float>(act * up[i]);
    }
    matvec(down, L.w_down, gate, dim, c.hidden_dim);
    if (c.post_norms) rmsnorm(down.data(), down.data(), L.post_ffn_norm.data(), dim, c.norm_eps);
    for (int i = 0; i < dim; ++i) x[i] += down[i];
  }

  rmsnorm(xn.data(), x.data(), output_norm_.data(), dim, c.norm_eps);
  matvec(logits_, c.tied_embeddings ? embedding_ : output_, xn, c.vocab_size, dim);
  if (c.final_softcap > 0.0f)
    for (float& z : logits_) z = static_cast<float>(c.final_softcap * std::tanh(z / static_cast<double>(c.final_softcap)));
  ++pos_;
  return logits_;
}

}  // namespace pocket
