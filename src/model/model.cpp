#include "model/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

#include "kernels/kernels.h"
#include "quant/source_grid.h"
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

// Element-wise work, fn(i) for every row i < n: inline for one row (decode:
// no pool synchronisation), spread over the pool for several, where doing it
// on one thread left the others idle between the matmuls.
template <class Fn>
void for_rows(int n, ThreadPool& pool, Fn&& fn) {
  if (n == 1) {
    fn(0);
    return;
  }
  pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) fn(static_cast<int>(i));
  });
}

// For each of n rows: add(x_i, xn_i) (a block output's residual add, or
// nothing), then xn_i = rmsnorm(x_i) with the weights `norm`.
template <class Add>
void add_then_norm(int n, const ModelConfig& c, float* x, float* xn, const std::vector<float>& norm,
                   ThreadPool& pool, Add&& add) {
  for_rows(n, pool, [&](int i) {
    float* xi = x + static_cast<size_t>(i) * c.dim;
    float* xni = xn + static_cast<size_t>(i) * c.dim;
    add(xi, xni);
    kernels::rmsnorm(xni, xi, norm.data(), c.dim, c.norm_eps);
  });
}

// The per-row buffers of a forward pass (a Context's or a DecodeScratch's)
// sized for n rows.
template <class Buffers>
void size_rows(Buffers& b, int n, const ModelConfig& c) {
  const size_t N = static_cast<size_t>(n);
  b.x.resize(N * c.dim);
  b.xn.resize(N * std::max(c.dim, c.q_dim()));
  b.q.resize(N * c.q_dim());
  b.k.resize(N * c.kv_dim());
  b.v.resize(N * c.kv_dim());
  b.attn.resize(N * c.q_dim());
  b.gate.resize(N * c.hidden_dim);
  b.up.resize(N * c.hidden_dim);
}

// Copies rows [0, n) of x, the residual stream after layer l, to rows
// pos0.. of `out` (laid out as Context::tap_out) when layer l is tapped.
void tap_rows_to(const Context& ctx, float* out, int l, int n, int pos0, const float* x, int dim) {
  const size_t n_taps = ctx.tap_layers.size(), D = static_cast<size_t>(dim);
  for (size_t t = 0; t < n_taps; ++t)
    if (ctx.tap_layers[t] == l)
      for (int i = 0; i < n; ++i)
        std::copy_n(x + static_cast<size_t>(i) * D, D, out + (static_cast<size_t>(pos0 + i) * n_taps + t) * D);
}
// The same into the context's hidden-state taps at positions pos0...
void tap_rows(Context& ctx, int l, int n, int pos0, const float* x, int dim) {
  if (ctx.tap_out != nullptr) tap_rows_to(ctx, ctx.tap_out, l, n, pos0, x, dim);
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

Context::Context(const ModelConfig& cfg, int n_ctx, KVType kv) : cache(cfg, n_ctx, kv) {}

Context::TreeStage::TreeStage(const ModelConfig& cfg, KVType kv) : rows(cfg, Model::kMaxTreeNodes, kv) {}

Model::Model(std::shared_ptr<const ModelFile> file, bool exact_kquants) : file_(std::move(file)), cfg_(file_->config) {
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
  repack_weights(!exact_kquants);
}

int Model::repack_threads() {
  return static_cast<int>(std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8)));
}

uint64_t Model::run_nbytes(const std::string& name) const {
  for (const auto& r : repacked_)
    if (r->view.name == name) return r->view.nbytes;
  return file_->get(name).nbytes;
}

bool Model::repacks_at_load(DType t, bool kquants) {
  return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
         ((t == DType::Q4_K || t == DType::Q5_K) && kquants);
}

// GGUF Q4_0, Q5_0, Q5_1 and Q8_0 matrices (and Q4_K / Q5_K ones when `kquants`)
// become PQ4 / PQ5 / PQ8 (group 32) copies, so they run on the tiled PQ
// kernels instead of the row-major block kernels (on Gemma 3 270M's Q4_K_M
// file: ~3.7x the GEMM speed of Q8_0 and Q5_0, and GEMVs near the bandwidth
// instead of at 53-66% of it): Q4_0, Q5_0, Q5_1 and Q8_0 with exactly the
// same values (Q5_0's 5.5 bits per weight become PQ5's 6), Q4_K / Q5_K within
// the fp16 rounding of their sub-block scales (quant/source_grid.h, the same
// re-layout `pocket quantize --weights source` writes). The work is split
// into pieces of kRepackRows rows run in parallel, and each piece gives its
// file pages back as soon as it is written, so even a 178 MB tied embedding
// never exists twice: the load's peak stays near the resident size after it.
void Model::repack_weights(bool kquants) {
  std::vector<const TensorView**> slots = {&embedding_, &output_};
  for (Layer& L : layers_)
    for (const TensorView** w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) slots.push_back(w);
  std::vector<const TensorView*> todo;
  for (const TensorView** w : slots)
    if (repacks_at_load((*w)->type, kquants) && quant::repacked_bytes(**w, (*w)->rows()) > 0 &&
        std::find(todo.begin(), todo.end(), *w) == todo.end())
      todo.push_back(*w);
  if (todo.empty()) return;
  struct Piece {
    size_t tensor;
    int64_t row0, rows;
  };
  std::vector<Piece> pieces;
  std::vector<std::unique_ptr<Repacked>> copies;
  for (size_t i = 0; i < todo.size(); ++i) {
    const TensorView& w = *todo[i];
    auto r = std::make_unique<Repacked>(static_cast<size_t>(quant::repacked_bytes(w, w.rows())));
    r->view = w;
    r->view.type = quant::source_grid_type(w.type);
    r->view.group = 32;
    r->view.data = r->bytes.data();
    r->view.nbytes = r->bytes.size();
    copies.push_back(std::move(r));
    for (int64_t r0 = 0; r0 < w.rows(); r0 += kRepackRows) pieces.push_back({i, r0, std::min(kRepackRows, w.rows() - r0)});
  }
  std::vector<std::atomic<bool>> failed(todo.size());  // a scale PQ cannot hold: the tensor stays as stored
  {
    ThreadPool pool(repack_threads());
    pool.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t b, int64_t e, int) {
      for (int64_t p = b; p < e; ++p) {
        const Piece& pc = pieces[static_cast<size_t>(p)];
        const TensorView& w = *todo[pc.tensor];
        const PageBuffer& out = copies[pc.tensor]->bytes;
        const int64_t at = quant::repacked_bytes(w, pc.row0);  // whole tiles before the piece
        out.populate(static_cast<size_t>(at), static_cast<size_t>(quant::repacked_bytes(w, pc.rows)));
        if (!quant::try_repack_rows_into(w, pc.row0, pc.rows, out.data() + at)) {
          failed[pc.tensor] = true;
          continue;
        }
        // Unchanged file pages re-read from the file if ever touched again
        // (a failed tensor's other pieces), so releasing early is safe.
        const size_t row_bytes = tensor_nbytes(w.type, {1, w.cols()}, 0, w.name);
        for (const auto& m : file_->mappings)
          m->release(static_cast<const uint8_t*>(w.data) + pc.row0 * row_bytes, pc.rows * row_bytes);
      }
    }, 1);
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    if (failed[i]) continue;
    for (const TensorView** w : slots)
      if (*w == todo[i]) *w = &copies[i]->view;
    repacked_.push_back(std::move(copies[i]));
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
  const int dim = c.dim;
  if (ctx.batch_capacity < n) {
    size_rows(ctx, n, c);
    ctx.batch_capacity = n;
  }
  float *x = ctx.x.data(), *xn = ctx.xn.data(), *q = ctx.q.data(), *k = ctx.k.data(), *v = ctx.v.data();
  float *attn = ctx.attn.data(), *gate = ctx.gate.data(), *up = ctx.up.data();

  for (int i = 0; i < n; ++i) embed_row(tokens[i], x + static_cast<size_t>(i) * dim);
  if (!packed) ctx.cache.reserve_append(n);

  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    // --- attention block (the previous layer's residual add is fused in) ---
    attention_input(l, n, x, xn, q, k, v, pool, [&](int i) {
      return packed ? RowPlace{packed->pos[i], packed->slot[i], &ctx.cache} : RowPlace{pos0 + i, pos0 + i, &ctx.cache};
    });
    if (l > 0 && !packed) tap_rows(ctx, l - 1, n, pos0, x, dim);  // x: the residual after layer l - 1
    attention(l, n, pos0, ctx, pool, packed);
    kernels::matmul(*L.wo, attn, n, xn, &pool);

    feed_forward(l, n, x, xn, gate, up, pool);
    if (taps && taps->layer_out && taps->layer == l && l < c.n_layers - 1)  // x + this block's output
      for_rows(n, pool, [&](int i) {
        const size_t at = static_cast<size_t>(i) * dim;
        float* o = taps->layer_out + at;
        std::memcpy(o, xn + at, static_cast<size_t>(dim) * sizeof(float));
        if (c.post_norms) kernels::rmsnorm(o, o, L.post_ffn_norm.data(), dim, c.norm_eps);
        for (int j = 0; j < dim; ++j) o[j] += x[at + j];
      });
  }
  for_rows(n, pool, [&](int i) {  // the last layer's residual
    add_block_output(x + static_cast<size_t>(i) * dim, xn + static_cast<size_t>(i) * dim,
                     layers_[c.n_layers - 1].post_ffn_norm);
  });
  if (!packed) {
    tap_rows(ctx, c.n_layers - 1, n, pos0, x, dim);
    ctx.cache.set_size(pos0 + n);
  }
  if (taps) {
    const size_t bytes = static_cast<size_t>(n) * dim * sizeof(float);
    if (taps->layer_out && taps->layer == c.n_layers - 1) std::memcpy(taps->layer_out, x, bytes);
    if (taps->final_normed)
      for_rows(n, pool, [&](int i) {
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

void Model::embed_row(int32_t token, float* x) const {
  kernels::dequant_row(*embedding_, token, x);
  if (cfg_.embed_scale != 1.0f)
    for (int j = 0; j < cfg_.dim; ++j) x[j] *= cfg_.embed_scale;
}

// x += out (normed first by `post` when the model has post-norms): the
// residual add of a block's output, fused into the next element-wise step.
void Model::add_block_output(float* x, float* out, const std::vector<float>& post) const {
  if (cfg_.post_norms) kernels::rmsnorm(out, out, post.data(), cfg_.dim, cfg_.norm_eps);
  for (int j = 0; j < cfg_.dim; ++j) x[j] += out[j];
}

// The attention block's input for n rows: the previous layer's residual
// add, the norm, the q/k/v projections, then each row's q/k post-processing
// with its keys/values stored at the position and cache `row_at(i)` gives.
void Model::attention_input(int l, int n, float* x, float* xn, float* q, float* k, float* v, ThreadPool& pool,
                            const std::function<RowPlace(int)>& row_at) const {
  const ModelConfig& c = cfg_;
  const Layer& L = layers_[l];
  add_then_norm(n, c, x, xn, L.attn_norm, pool, [&](float* xi, float* xni) {
    if (l > 0) add_block_output(xi, xni, layers_[l - 1].post_ffn_norm);
  });
  const kernels::MatmulTarget qkv[] = {{L.wq, q}, {L.wk, k}, {L.wv, v}};
  kernels::matmul_multi(qkv, xn, n, &pool);
  for_rows(n, pool, [&](int i) {
    qkv_row(l, q + static_cast<size_t>(i) * c.q_dim(), k + static_cast<size_t>(i) * c.kv_dim(),
            v + static_cast<size_t>(i) * c.kv_dim(), row_at(i));
  });
}

// The feed-forward block of layer l for n rows: the attention output's
// residual add, the norm, gate/up, the activation and down (into xn).
void Model::feed_forward(int l, int n, float* x, float* xn, float* gate, float* up, ThreadPool& pool) const {
  const ModelConfig& c = cfg_;
  const Layer& L = layers_[l];
  add_then_norm(n, c, x, xn, L.ffn_norm, pool,
                [&](float* xi, float* xni) { add_block_output(xi, xni, L.post_attn_norm); });
  const kernels::MatmulTarget gate_up[] = {{L.w_gate, gate}, {L.w_up, up}};
  kernels::matmul_multi(gate_up, xn, n, &pool);
  for_rows(n, pool, [&](int i) {
    const size_t at = static_cast<size_t>(i) * c.hidden_dim;
    if (c.ffn_act == Activation::GeluTanh)
      kernels::geglu(gate + at, up + at, c.hidden_dim);
    else
      kernels::swiglu(gate + at, up + at, c.hidden_dim);
  });
  kernels::matmul(*L.w_down, gate, n, xn, &pool);
}

// One token's q/k/v after the projections: biases, q/k norms, RoPE at
// `at.pos`, and its keys/values stored into slot `at.slot` of `at.cache`.
void Model::qkv_row(int l, float* q, float* k, float* v, const RowPlace& at) const {
  const ModelConfig& c = cfg_;
  const Layer& L = layers_[l];
  const int hd = c.head_dim;
  if (c.qkv_bias) {
    for (int j = 0; j < c.q_dim(); ++j) q[j] += L.bq[j];
    for (int j = 0; j < c.kv_dim(); ++j) k[j] += L.bk[j], v[j] += L.bv[j];
  }
  if (c.qk_norm) {
    for (int h = 0; h < c.n_heads; ++h) kernels::rmsnorm(q + h * hd, q + h * hd, L.q_norm.data(), hd, c.norm_eps);
    for (int h = 0; h < c.n_kv_heads; ++h) kernels::rmsnorm(k + h * hd, k + h * hd, L.k_norm.data(), hd, c.norm_eps);
  }
  kernels::rope(q, c.n_heads, hd, at.pos, c.rope_style, L.inv_freq);
  kernels::rope(k, c.n_kv_heads, hd, at.pos, c.rope_style, L.inv_freq);
  at.cache->write(l, 0, at.slot, k);
  at.cache->write(l, 1, at.slot, v);
}

// The layer loop of forward_batch with row i belonging to context i: the
// matmuls run over all rows at once (each weight read once per step), the
// attention of each row against its own context's cache.
void Model::forward_decode(std::span<const int32_t> tokens, std::span<Context* const> ctxs, ThreadPool& pool,
                           float* logits, DecodeScratch& s) const {
  const ModelConfig& c = cfg_;
  const int n = static_cast<int>(tokens.size());
  if (n == 0 || ctxs.size() != tokens.size())
    fail("forward_decode: ", tokens.size(), " tokens for ", ctxs.size(), " contexts");
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      fail("token id ", tokens[i], " is outside the vocabulary (", c.vocab_size, ")");
    if (ctxs[i]->cache.size() + 1 > ctxs[i]->cache.capacity())
      fail("the input needs ", ctxs[i]->cache.size() + 1, " tokens of context but the context holds ",
           ctxs[i]->cache.capacity());
    for (int j = 0; j < i; ++j)
      if (ctxs[j] == ctxs[i]) fail("forward_decode: a context appears twice in one step");
  }
  const int dim = c.dim, q_dim = c.q_dim();
  const size_t N = static_cast<size_t>(n);
  size_rows(s, n, c);
  float *x = s.x.data(), *xn = s.xn.data(), *q = s.q.data(), *k = s.k.data(), *v = s.v.data();
  float *attn = s.attn.data(), *gate = s.gate.data(), *up = s.up.data();
  std::vector<int> pos(N);
  for (int i = 0; i < n; ++i) {
    Context& ctx = *ctxs[i];
    pos[i] = ctx.cache.size();
    embed_row(tokens[i], x + i * static_cast<size_t>(dim));
    ctx.cache.reserve_append(1);
    if (ctx.batch_capacity < 1) {  // attention() reads q and writes attn of the context
      ctx.q.resize(q_dim);
      ctx.attn.resize(q_dim);
    }
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    attention_input(l, n, x, xn, q, k, v, pool,
                    [&](int i) { return RowPlace{pos[i], pos[i], &ctxs[i]->cache}; });
    if (l > 0)
      for (int i = 0; i < n; ++i) tap_rows(*ctxs[i], l - 1, 1, pos[i], x + i * static_cast<size_t>(dim), dim);
    for (int i = 0; i < n; ++i) {
      Context& ctx = *ctxs[i];
      std::copy_n(q + static_cast<size_t>(i) * q_dim, q_dim, ctx.q.data());
      attention(l, 1, pos[i], ctx, pool);
      std::copy_n(ctx.attn.data(), q_dim, attn + static_cast<size_t>(i) * q_dim);
    }
    kernels::matmul(*L.wo, attn, n, xn, &pool);
    feed_forward(l, n, x, xn, gate, up, pool);
  }
  add_then_norm(n, c, x, xn, output_norm_, pool, [&](float* xi, float* xni) {
    add_block_output(xi, xni, layers_[c.n_layers - 1].post_ffn_norm);
  });
  for (int i = 0; i < n; ++i) tap_rows(*ctxs[i], c.n_layers - 1, 1, pos[i], x + i * static_cast<size_t>(dim), dim);
  for (int i = 0; i < n; ++i) ctxs[i]->cache.set_size(pos[i] + 1);
  kernels::matmul(*output_, xn, n, logits, &pool);
  if (c.final_softcap > 0.0f)
    for (size_t j = 0; j < N * c.vocab_size; ++j) logits[j] = c.final_softcap * std::tanh(logits[j] / c.final_softcap);
}

void Model::forward_tree(std::span<const int32_t> tokens, std::span<const int> parents, Context& ctx, ThreadPool& pool,
                         float* logits) const {
  const ModelConfig& c = cfg_;
  const int n = static_cast<int>(tokens.size());
  if (!packable()) fail("tree verify: the model has sliding-window layers");
  if (n < 1 || n > kMaxTreeNodes) fail("tree verify: ", n, " nodes (1 to ", kMaxTreeNodes, ")");
  if (parents.size() != tokens.size()) fail("tree verify: ", tokens.size(), " tokens but ", parents.size(), " parents");
  if (!ctx.tree || ctx.tree->rows.type() != ctx.cache.type()) ctx.tree = std::make_unique<Context::TreeStage>(c, ctx.cache.type());
  Context::TreeStage& t = *ctx.tree;
  t.base = -1;
  t.parents.assign(parents.begin(), parents.end());
  t.depth.assign(tokens.size(), 0);
  std::vector<int> path;  // the nodes from the root to the previous node
  int max_depth = 0;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      fail("token id ", tokens[i], " is outside the vocabulary (", c.vocab_size, ")");
    if (i == 0) {
      if (parents[0] != -1) fail("tree verify: node 0 is the root (parent -1), not a child of ", parents[0]);
    } else {
      while (!path.empty() && path.back() != parents[i]) path.pop_back();
      if (path.empty())
        fail("tree verify: node ", i, "'s parent ", parents[i], " is not on the path to node ", i - 1,
             " (nodes come in depth-first preorder)");
      t.depth[i] = t.depth[parents[i]] + 1;
    }
    path.push_back(i);
    max_depth = std::max(max_depth, t.depth[i]);
  }
  const int P = ctx.cache.size();
  if (P + max_depth + 1 > ctx.cache.capacity())
    fail("tree verify: a tree of depth ", max_depth + 1, " does not fit the context of ", ctx.cache.capacity(), " after ", P);
  ctx.cache.reserve_append(max_depth + 1);
  if (ctx.batch_capacity < n) {
    size_rows(ctx, n, c);
    ctx.batch_capacity = n;
  }
  const int dim = c.dim, q_dim = c.q_dim();
  t.q.resize(static_cast<size_t>(n) * q_dim);
  t.attn.resize(static_cast<size_t>(n) * q_dim);
  float *x = ctx.x.data(), *xn = ctx.xn.data(), *k = ctx.k.data(), *v = ctx.v.data();
  float *gate = ctx.gate.data(), *up = ctx.up.data(), *q = t.q.data(), *attn = t.attn.data();
  // Taps: node i's rows go where position i's would in tap_out (commit_tree
  // moves the accepted path's to their positions).
  const size_t tap_row = ctx.tap_layers.size() * static_cast<size_t>(c.dim);
  if (ctx.tap_out != nullptr) t.taps.resize(static_cast<size_t>(n) * tap_row);
  auto tap_nodes = [&](int l) {
    if (ctx.tap_out != nullptr) tap_rows_to(ctx, t.taps.data(), l, n, 0, x, dim);
  };
  // Chain segments: [seg[s], seg[s + 1]), each node the child of the one before.
  std::vector<int> seg;
  for (int i = 0; i < n; ++i)
    if (i == 0 || parents[i] != i - 1) seg.push_back(i);
  seg.push_back(n);

  for (int i = 0; i < n; ++i) embed_row(tokens[i], x + static_cast<size_t>(i) * dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    attention_input(l, n, x, xn, q, k, v, pool, [&](int i) { return RowPlace{P + t.depth[i], i, &t.rows}; });
    if (l > 0) tap_nodes(l - 1);  // x: the residual after layer l - 1
    for (size_t s = 0; s + 1 < seg.size(); ++s) {
      const int a = seg[s], len = seg[s + 1] - a, d0 = t.depth[a];
      // The path above the segment is in place: it ends at the segment's
      // parent, which the previous segment's path holds at the same depths.
      ctx.cache.copy_rows_from(t.rows, l, P + d0, a, len);
      std::copy_n(q + static_cast<size_t>(a) * q_dim, static_cast<size_t>(len) * q_dim, ctx.q.data());
      attention(l, len, P + d0, ctx, pool);
      std::copy_n(ctx.attn.data(), static_cast<size_t>(len) * q_dim, attn + static_cast<size_t>(a) * q_dim);
    }
    kernels::matmul(*L.wo, attn, n, xn, &pool);
    feed_forward(l, n, x, xn, gate, up, pool);
  }
  t.base = P;
  if (logits == nullptr && ctx.tap_out == nullptr) return;
  add_then_norm(n, c, x, xn, output_norm_, pool, [&](float* xi, float* xni) {
    add_block_output(xi, xni, layers_[c.n_layers - 1].post_ffn_norm);
  });
  tap_nodes(c.n_layers - 1);
  if (logits == nullptr) return;
  kernels::matmul(*output_, xn, n, logits, &pool);
  if (c.final_softcap > 0.0f)
    for (size_t j = 0; j < static_cast<size_t>(n) * c.vocab_size; ++j)
      logits[j] = c.final_softcap * std::tanh(logits[j] / c.final_softcap);
}

void Model::commit_tree(std::span<const int> path, Context& ctx) const {
  Context::TreeStage* t = ctx.tree.get();
  if (t == nullptr || t->base < 0 || t->base != ctx.cache.size()) fail("tree commit: no tree verified at this position");
  const int n = static_cast<int>(t->parents.size());
  for (size_t j = 0; j < path.size(); ++j) {
    const int node = path[j];
    if (node < 0 || node >= n || t->parents[node] != (j == 0 ? -1 : path[j - 1]))
      fail("tree commit: node ", node, " at depth ", j, " is not the child of the path before it");
  }
  const int P = t->base, m = static_cast<int>(path.size());
  for (int l = 0; l < cfg_.n_layers; ++l)
    for (int j = 0; j < m;) {  // runs of consecutive nodes in one copy
      int e = j + 1;
      while (e < m && path[e] == path[e - 1] + 1) ++e;
      ctx.cache.copy_rows_from(t->rows, l, P + j, path[j], e - j);
      j = e;
    }
  if (ctx.tap_out != nullptr) {
    const size_t tap_row = ctx.tap_layers.size() * static_cast<size_t>(cfg_.dim);
    if (t->taps.size() < static_cast<size_t>(n) * tap_row) fail("tree commit: the tree ran without hidden-state taps");
    for (int j = 0; j < m; ++j)
      std::copy_n(t->taps.data() + static_cast<size_t>(path[j]) * tap_row, tap_row,
                  ctx.tap_out + static_cast<size_t>(P + j) * tap_row);
  }
  ctx.cache.set_size(P + m);
  t->base = -1;
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
  // A q4 cache holds rotated rows (kv_rotate): rotate the queries alike.
  const bool rotated = ctx.cache.type() == KVType::Q4;
  if (rotated) kv_rotate(ctx.q.data(), static_cast<int64_t>(n) * c.n_heads, hd);
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
      const KVCache& kv = ctx.cache;
      if (kv.type() == KVType::F16) {
        kernels::attention_heads(qs, kv.k(layer, kvh, stored), kv.v(layer, kvh, stored), hd, scale, scratch);
      } else if (kv.type() == KVType::Q4) {
        kernels::attention_heads_q4(qs, {kv.row(layer, 0, kvh, stored), kv.row_scale(layer, 0, kvh, stored)},
                                    {kv.row(layer, 1, kvh, stored), kv.row_scale(layer, 1, kvh, stored)}, hd, scale,
                                    scratch);
      } else {
        const kernels::Q8Rows kq{reinterpret_cast<const int8_t*>(kv.row(layer, 0, kvh, stored)),
                                 kv.row_scale(layer, 0, kvh, stored)};
        const kernels::Q8Rows vq{reinterpret_cast<const int8_t*>(kv.row(layer, 1, kvh, stored)),
                                 kv.row_scale(layer, 1, kvh, stored)};
        kernels::attention_heads_q8(qs, kq, vq, hd, scale, scratch);
      }
    }
  });
  if (rotated) kv_rotate(ctx.attn.data(), static_cast<int64_t>(n) * c.n_heads, hd);  // back from the rotated values
}

}  // namespace pocket
