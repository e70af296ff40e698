#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

#include "kernels/kernels.h"
#include "quant/repack.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket {

namespace {

// Small 1-D tensors (norm weights, biases) are converted to f32 once.
std::vector<float> small_f32(const ModelFile& f, const std::string& name, int64_t expected) {
  const TensorView& t = f.get(name);
  if (t.numel() != expected) fail(f.path, ": tensor ", name, " has ", t.numel(), " elements, expected ", expected);
  std::vector<float> out(static_cast<size_t>(expected));
  TensorView row = t;  // a vector is dequantized as a 1 x n matrix
  row.shape = {1, expected};
  kernels::dequant_row(row, 0, out.data());
  return out;
}

const TensorView* matrix(const ModelFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const TensorView& t = f.get(name);
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
    fail(f.path, ": tensor ", name, " has the wrong shape (expected ", rows, " x ", cols, ")");
  return &t;
}

// What forward() and forward_hidden() refuse: no tokens, too many for the
// context, ids outside the vocabulary.
void check_input(std::span<const int32_t> tokens, const Context& ctx, const ModelConfig& cfg) {
  if (tokens.empty()) fail("forward: no tokens to process");
  const int n_total = static_cast<int>(tokens.size());
  if (ctx.cache.size() + n_total > ctx.cache.capacity())
    fail("the input needs ", ctx.cache.size() + n_total, " tokens of context but the context holds ",
         ctx.cache.capacity(), " (raise the context size or shorten the prompt)");
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg.vocab_size) fail("token id ", t, " is outside the vocabulary (", cfg.vocab_size, ")");
}

}  // namespace

Context::Context(const ModelConfig& cfg, int n_ctx) : cache(cfg, n_ctx) {}

Model::Model(std::shared_ptr<const ModelFile> file) : file_(std::move(file)), cfg_(file_->config) {
  const ModelFile& f = *file_;
  const ModelConfig& c = cfg_;
  embedding_ = matrix(f, "token_embd.weight", c.vocab_size, c.dim);
  output_ = c.tied_embeddings ? embedding_ : matrix(f, "output.weight", c.vocab_size, c.dim);
  output_norm_ = small_f32(f, "output_norm.weight", c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    L.wq = matrix(f, p + "attn_q.weight", c.q_dim(), c.dim);
    L.wk = matrix(f, p + "attn_k.weight", c.kv_dim(), c.dim);
    L.wv = matrix(f, p + "attn_v.weight", c.kv_dim(), c.dim);
    L.wo = matrix(f, p + "attn_output.weight", c.dim, c.q_dim());
    L.w_gate = matrix(f, p + "ffn_gate.weight", c.hidden_dim, c.dim);
    L.w_up = matrix(f, p + "ffn_up.weight", c.hidden_dim, c.dim);
    L.w_down = matrix(f, p + "ffn_down.weight", c.dim, c.hidden_dim);
    L.attn_norm = small_f32(f, p + "attn_norm.weight", c.dim);
    L.ffn_norm = small_f32(f, p + "ffn_norm.weight", c.dim);
    if (c.qkv_bias) {
      L.bq = small_f32(f, p + "attn_q.bias", c.q_dim());
      L.bk = small_f32(f, p + "attn_k.bias", c.kv_dim());
      L.bv = small_f32(f, p + "attn_v.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      L.q_norm = small_f32(f, p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = small_f32(f, p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.post_norms) {
      L.post_attn_norm = small_f32(f, p + "post_attention_norm.weight", c.dim);
      L.post_ffn_norm = small_f32(f, p + "post_ffw_norm.weight", c.dim);
    }
    layers_.push_back(std::move(L));
  }
  auto freqs = [&](float theta) {
    std::vector<float> t(c.head_dim / 2);
    for (int i = 0; i < c.head_dim / 2; ++i)
      t[i] = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / c.head_dim));
    return t;
  };
  inv_freq_ = freqs(c.rope_theta);
  inv_freq_local_ = freqs(c.rope_theta_local);
  for (int l = 0; l < c.n_layers; ++l) layers_[l].inv_freq = c.is_local(l) ? inv_freq_local_.data() : inv_freq_.data();
  repack_weights();
}

// GGUF Q4_0 matrices become PQ4 (group 32) copies, exactly the same values,
// so they run on the tiled PQ4 kernels (several times the row-major Q4_0
// kernel's prefill speed); the file pages they came from are released, so
// the copy does not add to the resident memory. Tensors are repacked in
// parallel, one per task.
void Model::repack_weights() {
  std::vector<const TensorView**> slots = {&embedding_, &output_};
  for (Layer& L : layers_)
    for (const TensorView** w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) slots.push_back(w);
  std::vector<const TensorView*> todo;
  for (const TensorView** w : slots)
    if ((*w)->type == DType::Q4_0 && std::find(todo.begin(), todo.end(), *w) == todo.end()) todo.push_back(*w);
  if (todo.empty()) return;
  std::vector<std::optional<std::vector<uint8_t>>> bytes(todo.size());
  {
    ThreadPool pool(static_cast<int>(std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8))));
    pool.parallel_for(static_cast<int64_t>(todo.size()), [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) bytes[static_cast<size_t>(i)] = quant::repack_q4_0_to_pq4(*todo[static_cast<size_t>(i)]);
    });
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    if (!bytes[i]) continue;  // a scale PQ4 cannot hold exactly: stays Q4_0
    auto r = std::make_unique<Repacked>();
    r->bytes = std::move(*bytes[i]);
    r->view = *todo[i];
    r->view.type = DType::PQ4;
    r->view.group = 32;
    r->view.data = r->bytes.data();
    r->view.nbytes = r->bytes.size();
    for (const TensorView** w : slots)
      if (*w == todo[i]) *w = &r->view;
    for (const auto& m : file_->mappings) m->release(todo[i]->data, todo[i]->nbytes);
    repacked_.push_back(std::move(r));
  }
}

void Model::forward(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
                    bool all_logits) const {
  check_input(tokens, ctx, cfg_);
  const int n_total = static_cast<int>(tokens.size());
  static_assert(kMaxBatch <= KVCache::kMaxWrite);
  for (int done = 0; done < n_total; done += kMaxBatch) {
    int n = std::min(kMaxBatch, n_total - done);
    bool last = done + n == n_total;
    float* out = all_logits ? logits + static_cast<size_t>(done) * cfg_.vocab_size : (last ? logits : nullptr);
    forward_batch(tokens.subspan(done, n), ctx, pool, out, all_logits);
  }
}

void Model::forward_hidden(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool,
                           const HiddenTaps& taps) const {
  if (taps.layer_out != nullptr && (taps.layer < 0 || taps.layer >= cfg_.n_layers))
    fail("hidden-state tap: layer ", taps.layer, " is outside the model's 0..", cfg_.n_layers - 1);
  check_input(tokens, ctx, cfg_);
  const int n_total = static_cast<int>(tokens.size());
  for (int done = 0; done < n_total; done += kMaxBatch) {
    const size_t at = static_cast<size_t>(done) * cfg_.dim;
    HiddenTaps part = taps;
    if (part.final_normed) part.final_normed += at;
    if (part.layer_out) part.layer_out += at;
    forward_batch(tokens.subspan(done, std::min(kMaxBatch, n_total - done)), ctx, pool, nullptr, false, &part);
  }
}

bool Model::packable() const {
  for (int l = 0; l < cfg_.n_layers; ++l)
    if (cfg_.is_local(l)) return false;
  return true;
}

void Model::forward_packed(std::span<const int32_t> tokens, const PackedRows& rows, Context& ctx, ThreadPool& pool,
                           const HiddenTaps* taps, float* logits) const {
  if (!packable()) fail("packed rows: the model has sliding-window layers");
  if (taps && taps->layer_out != nullptr && (taps->layer < 0 || taps->layer >= cfg_.n_layers))
    fail("hidden-state tap: layer ", taps->layer, " is outside the model's 0..", cfg_.n_layers - 1);
  if (tokens.empty()) fail("forward: no tokens to process");
  const int n_total = static_cast<int>(tokens.size());
  for (int i = 0; i < n_total; ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size)
      fail("token id ", tokens[i], " is outside the vocabulary (", cfg_.vocab_size, ")");
    if (rows.slot[i] < 0 || rows.slot[i] >= ctx.cache.capacity() || rows.first[i] < 0 || rows.first[i] > rows.slot[i] ||
        rows.pos[i] < 0)
      fail("packed rows: row ", i, " (slot ", rows.slot[i], ", first ", rows.first[i], ") does not fit the context of ",
           ctx.cache.capacity());
  }
  for (int done = 0; done < n_total; done += kMaxBatch) {
    const size_t at = static_cast<size_t>(done) * cfg_.dim;
    HiddenTaps part;
    if (taps) {
      part = *taps;
      if (part.final_normed) part.final_normed += at;
      if (part.layer_out) part.layer_out += at;
    }
    const PackedRows r{rows.pos + done, rows.slot + done, rows.first + done};
    float* out = logits ? logits + static_cast<size_t>(done) * cfg_.vocab_size : nullptr;
    forward_batch(tokens.subspan(done, std::min(kMaxBatch, n_total - done)), ctx, pool, out, true, taps ? &part : nullptr,
                  &r);
  }
}

void Model::forward_batch(std::span<const int32_t> tokens, Context& ctx, ThreadPool& pool, float* logits,
                          bool all_logits, const HiddenTaps* taps, const PackedRows* packed) const {
  const ModelConfig& c = cfg_;
  const int n = static_cast<int>(tokens.size());
  const int pos0 = ctx.cache.size();
  const int dim = c.dim, hd = c.head_dim, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  if (ctx.batch_capacity < n) {
    size_t N = static_cast<size_t>(n);
    ctx.x.resize(N * dim);
    ctx.xn.resize(N * std::max(dim, q_dim));
    ctx.q.resize(N * q_dim);
    ctx.k.resize(N * kv_dim);
    ctx.v.resize(N * kv_dim);
    ctx.attn.resize(N * q_dim);
    ctx.gate.resize(N * c.hidden_dim);
    ctx.up.resize(N * c.hidden_dim);
    ctx.batch_capacity = n;
  }
  float *x = ctx.x.data(), *xn = ctx.xn.data(), *q = ctx.q.data(), *k = ctx.k.data(), *v = ctx.v.data();
  float *attn = ctx.attn.data(), *gate = ctx.gate.data(), *up = ctx.up.data();

  for (int i = 0; i < n; ++i) {
    float* xi = x + static_cast<size_t>(i) * dim;
    kernels::dequant_row(*embedding_, tokens[i], xi);
    if (c.embed_scale != 1.0f)
      for (int j = 0; j < dim; ++j) xi[j] *= c.embed_scale;
  }
  if (!packed) ctx.cache.reserve_append(n);

  // Element-wise work per token: inline for one token (decode: no pool
  // synchronisation), spread over the pool for a prompt batch, where doing it
  // on one thread left the others idle between the matmuls.
  auto per_token = [&](auto&& fn) {
    if (n == 1) {
      fn(0);
      return;
    }
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) fn(static_cast<int>(i));
    });
  };

  // x += out (normed first by `post` when the model has post-norms): the
  // residual add of a block's output, fused into the next element-wise step.
  auto add_block_output = [&](float* xi, float* out, const std::vector<float>& post) {
    if (c.post_norms) kernels::rmsnorm(out, out, post.data(), dim, c.norm_eps);
    for (int j = 0; j < dim; ++j) xi[j] += out[j];
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    // --- attention block (the previous layer's residual add is fused in) ---
    per_token([&](int i) {
      float* xi = x + static_cast<size_t>(i) * dim;
      float* xni = xn + static_cast<size_t>(i) * dim;
      if (l > 0) add_block_output(xi, xni, layers_[l - 1].post_ffn_norm);
      kernels::rmsnorm(xni, xi, L.attn_norm.data(), dim, c.norm_eps);
    });
    const kernels::MatmulTarget qkv[] = {{L.wq, q}, {L.wk, k}, {L.wv, v}};
    kernels::matmul_multi(qkv, xn, n, &pool);
    per_token([&](int i) {
      float* qi = q + static_cast<size_t>(i) * q_dim;
      float* ki = k + static_cast<size_t>(i) * kv_dim;
      float* vi = v + static_cast<size_t>(i) * kv_dim;
      if (c.qkv_bias) {
        for (int j = 0; j < q_dim; ++j) qi[j] += L.bq[j];
        for (int j = 0; j < kv_dim; ++j) ki[j] += L.bk[j], vi[j] += L.bv[j];
      }
      if (c.qk_norm) {
        for (int h = 0; h < c.n_heads; ++h) kernels::rmsnorm(qi + h * hd, qi + h * hd, L.q_norm.data(), hd, c.norm_eps);
        for (int h = 0; h < c.n_kv_heads; ++h)
          kernels::rmsnorm(ki + h * hd, ki + h * hd, L.k_norm.data(), hd, c.norm_eps);
      }
      const int pos = packed ? packed->pos[i] : pos0 + i, slot = packed ? packed->slot[i] : pos0 + i;
      kernels::rope(qi, c.n_heads, hd, pos, c.rope_style, L.inv_freq);
      kernels::rope(ki, c.n_kv_heads, hd, pos, c.rope_style, L.inv_freq);
      for (int h = 0; h < c.n_kv_heads; ++h) {
        kernels::f32_to_f16_row(ki + h * hd, ctx.cache.k(l, h, slot), hd);
        kernels::f32_to_f16_row(vi + h * hd, ctx.cache.v(l, h, slot), hd);
      }
    });
    attention(l, n, pos0, ctx, pool, packed);
    kernels::matmul(*L.wo, attn, n, xn, &pool);

    // --- feed-forward block ---
    per_token([&](int i) {
      float* xi = x + static_cast<size_t>(i) * dim;
      float* xni = xn + static_cast<size_t>(i) * dim;
      add_block_output(xi, xni, L.post_attn_norm);
      kernels::rmsnorm(xni, xi, L.ffn_norm.data(), dim, c.norm_eps);
    });
    const kernels::MatmulTarget gate_up[] = {{L.w_gate, gate}, {L.w_up, up}};
    kernels::matmul_multi(gate_up, xn, n, &pool);
    per_token([&](int i) {
      const size_t at = static_cast<size_t>(i) * c.hidden_dim;
      if (c.ffn_act == Activation::GeluTanh)
        kernels::geglu(gate + at, up + at, c.hidden_dim);
      else
        kernels::swiglu(gate + at, up + at, c.hidden_dim);
    });
    kernels::matmul(*L.w_down, gate, n, xn, &pool);
    if (taps && taps->layer_out && taps->layer == l && l < c.n_layers - 1)  // x + this block's output
      per_token([&](int i) {
        const size_t at = static_cast<size_t>(i) * dim;
        float* o = taps->layer_out + at;
        std::memcpy(o, xn + at, static_cast<size_t>(dim) * sizeof(float));
        if (c.post_norms) kernels::rmsnorm(o, o, L.post_ffn_norm.data(), dim, c.norm_eps);
        for (int j = 0; j < dim; ++j) o[j] += x[at + j];
      });
  }
  per_token([&](int i) {  // the last layer's residual
    add_block_output(x + static_cast<size_t>(i) * dim, xn + static_cast<size_t>(i) * dim,
                     layers_[c.n_layers - 1].post_ffn_norm);
  });
  if (!packed) ctx.cache.set_size(pos0 + n);
  if (taps) {
    const size_t bytes = static_cast<size_t>(n) * dim * sizeof(float);
    if (taps->layer_out && taps->layer == c.n_layers - 1) std::memcpy(taps->layer_out, x, bytes);
    if (taps->final_normed)
      per_token([&](int i) {
        kernels::rmsnorm(taps->final_normed + static_cast<size_t>(i) * dim, x + static_cast<size_t>(i) * dim,
                         output_norm_.data(), dim, c.norm_eps);
      });
  }

  if (logits == nullptr) return;
  // The output head runs only for the rows whose logits are wanted.
  int first = all_logits ? 0 : n - 1;
  int rows = n - first;
  for (int i = first; i < n; ++i)
    kernels::rmsnorm(xn + (i - first) * dim, x + i * dim, output_norm_.data(), dim, c.norm_eps);
  kernels::matmul(*output_, xn, rows, logits, &pool);
  if (c.final_softcap > 0.0f)
    for (size_t j = 0; j < static_cast<size_t>(rows) * c.vocab_size; ++j)
      logits[j] = c.final_softcap * std::tanh(logits[j] / c.final_softcap);
}

void Model::attention(int layer, int n, int pos0, Context& ctx, ThreadPool& pool, const PackedRows* packed) const {
  const ModelConfig& c = cfg_;
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const float scale = c.query_scale();
  // Slot 0 of the layer's cache holds position `stored`; a local layer's
  // token at position p sees [p - window + 1, p].
  const int stored = ctx.cache.first_stored(layer);
  const bool local = c.is_local(layer);
  // A task is the query heads of one KV head (up to kMaxAttentionQueries)
  // for a few consecutive tokens, so each cached K/V row is read once for
  // all of them. Token i sees positions [0, pos0 + i].
  const int heads_per_task = std::min(group, kernels::kMaxAttentionQueries);
  const int head_chunks = (group + heads_per_task - 1) / heads_per_task;
  const int tokens_per_task = std::max(1, kernels::kMaxAttentionQueries / heads_per_task);
  const int token_blocks = (n + tokens_per_task - 1) / tokens_per_task;
  int span = pos0 + n;  // slots the rows see at most
  if (packed) span = 1 + *std::max_element(packed->slot, packed->slot + n);
  const size_t per_thread = static_cast<size_t>(kernels::kMaxAttentionQueries) * span;
  if (ctx.scores.size() < per_thread * pool.size()) ctx.scores.resize(per_thread * pool.size());
  const int64_t n_tasks = static_cast<int64_t>(token_blocks) * c.n_kv_heads * head_chunks;
  pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end, int thread) {
    float* scratch = ctx.scores.data() + per_thread * thread;
    for (int64_t task = begin; task < end; ++task) {
      const int chunk = static_cast<int>(task % head_chunks);
      const int kvh = static_cast<int>(task / head_chunks % c.n_kv_heads);
      const int i0 = static_cast<int>(task / head_chunks / c.n_kv_heads) * tokens_per_task;
      const int h0 = kvh * group + chunk * heads_per_task, h1 = std::min(h0 + heads_per_task, (kvh + 1) * group);
      kernels::AttentionQueries qs;
      for (int i = i0; i < std::min(n, i0 + tokens_per_task); ++i)
        for (int h = h0; h < h1; ++h) {
          const size_t at = static_cast<size_t>(i) * c.q_dim() + static_cast<size_t>(h) * hd;
          qs.q[qs.n] = ctx.q.data() + at;
          qs.out[qs.n] = ctx.attn.data() + at;
          if (packed) {  // a global layer (packable()): stored == 0
            qs.n_ctx[qs.n] = packed->slot[i] + 1;
            qs.first[qs.n] = packed->first[i];
          } else {
            qs.n_ctx[qs.n] = pos0 + i + 1 - stored;
            qs.first[qs.n] = local ? std::max(0, pos0 + i + 1 - c.sliding_window - stored) : 0;
          }
          ++qs.n;
        }
      kernels::attention_heads(qs, ctx.cache.k(layer, kvh, stored), ctx.cache.v(layer, kvh, stored), hd, scale, scratch);
    }
  });
}

}  // namespace pocket
