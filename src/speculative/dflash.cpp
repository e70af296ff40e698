#include "speculative/dflash.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <set>

#include "generate/sampler.h"
#include "kernels/kernels.h"
#include "speculative/dflash_file.h"
#include "util/error.h"
#include "util/half.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {

using json = nlohmann::json;

int get_int(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer()) fail(where, ": config.json needs an integer \"", key, "\"");
  const int64_t v = j[key].get<int64_t>();
  if (v < 0 || v > (1 << 20)) fail(where, ": config.json \"", key, "\" = ", v, " is out of range");
  return static_cast<int>(v);
}

std::vector<float> vector_f32(const TensorView& t, int64_t n, const std::string& name, const std::string& where) {
  if (t.numel() != n) fail(where, ": tensor ", name, " has ", t.numel(), " elements, expected ", n);
  TensorView row = t;
  row.shape = {1, n};
  std::vector<float> out(static_cast<size_t>(n));
  kernels::dequant_row(row, 0, out.data());
  return out;
}

// A draft setting from dflash_config, else from the top level (the order
// z-lab's DFlash2 code reads them in); null when neither has it.
const json* setting(const json& j, const json& d, const char* key) {
  if (d.contains(key) && !d[key].is_null()) return &d[key];
  if (j.contains(key) && !j[key].is_null()) return &j[key];
  return nullptr;
}

float get_float_setting(const json& j, const json& d, const char* key, float fallback, const std::string& where) {
  const json* v = setting(j, d, key);
  if (!v) return fallback;
  if (!v->is_number() || !(std::abs(v->get<double>()) <= 1e30))
    fail(where, ": config.json \"", key, "\" is not a number of a sensible size");
  return static_cast<float>(v->get<double>());
}

// The logit transforms and DFlash2's conv and selector settings; a DFlash2
// draft needs all four of conv_kernel_size, conv_group_size, selector_rank
// and selector_top_k.
void read_dflash2_settings(const json& j, const json& d, const ModelConfig& target, DFlashConfig& c,
                           const std::string& where) {
  c.output_multiplier = get_float_setting(j, d, "output_multiplier", 1.0f, where);
  if (!(c.output_multiplier > 0)) fail(where, ": output_multiplier ", c.output_multiplier, " must be > 0");
  c.final_logit_softcapping = get_float_setting(j, d, "final_logit_softcapping", 0.0f, where);
  if (c.final_logit_softcapping < 0) fail(where, ": final_logit_softcapping ", c.final_logit_softcapping, " must be >= 0");
  if (get_float_setting(j, d, "input_embedding_scale", 1.0f, where) != 1.0f)
    fail(where, ": config.json sets input_embedding_scale, which Pocket's DFlash drafts do not support");
  const char* keys[] = {"conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"};
  int* fields[] = {&c.conv_kernel, &c.conv_group, &c.selector_rank, &c.selector_top_k};
  int present = 0;
  for (const char* k : keys) present += setting(j, d, k) != nullptr;
  const bool named_dflash2 = j.contains("architectures") && j["architectures"].is_array() &&
                             std::any_of(j["architectures"].begin(), j["architectures"].end(),
                                         [](const json& a) { return a.is_string() && a.get<std::string>() == "DFlash2DraftModel"; });
  if (present == 0 && !named_dflash2) return;
  for (int i = 0; i < 4; ++i) {
    const json* v = setting(j, d, keys[i]);
    if (!v) fail(where, ": a DFlash2 draft needs \"", keys[i], "\" (conv_kernel_size, conv_group_size, selector_rank, selector_top_k)");
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > (1 << 16))
      fail(where, ": DFlash2 setting \"", keys[i], "\" = ", v->dump(), " must be an integer from 1 to 65536");
    *fields[i] = v->get<int>();
  }
  if (c.conv_kernel > 64) fail(where, ": DFlash2 conv_kernel_size ", c.conv_kernel, " is too large (at most 64)");
  if (c.hidden % c.conv_group != 0)
    fail(where, ": DFlash2 conv_group_size ", c.conv_group, " does not divide the hidden size ", c.hidden);
  if (c.selector_top_k > target.vocab_size)
    fail(where, ": DFlash2 selector_top_k ", c.selector_top_k, " exceeds the vocabulary (", target.vocab_size, " tokens)");
  if (c.selector_rank > 4096) fail(where, ": DFlash2 selector_rank ", c.selector_rank, " is too large (at most 4096)");
}

}  // namespace

DFlashDraft::DFlashDraft(const std::string& path, const ModelConfig& target) {
  const std::string where = path;
  std::string config_text;
  if (!std::filesystem::exists(path)) fail(path, ": no such DFlash draft folder or file");
  if (std::filesystem::is_directory(path)) {
    folder_.emplace(SafetensorsFile::open(path + "/model.safetensors"));
    tensors_ = folder_->tensors();
    config_text = read_text_file(path + "/config.json");
    if (file_exists(path + "/" + kDraftVocabFileName)) draft_vocab_ = read_draft_vocab(path + "/" + kDraftVocabFileName);
  } else {
    DFlashDraftFile f = open_dflash_draft_file(path);
    tensors_ = std::move(f.tensors);
    file_ = std::move(f.mapping);
    config_text = std::move(f.config_json);
    draft_vocab_ = std::move(f.draft_vocab);
  }
  if (draft_vocab_ && draft_vocab_->vocab_size != target.vocab_size)
    fail(where, ": the draft vocabulary ranks a vocabulary of ", draft_vocab_->vocab_size, " tokens, the target has ",
         target.vocab_size);
  json j;
  try {
    j = json::parse(config_text);
  } catch (const json::exception& e) {
    fail(where, ": config.json is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(where, ": config.json is not an object");
  DFlashConfig& c = cfg_;
  c.hidden = get_int(j, "hidden_size", where);
  c.ffn = get_int(j, "intermediate_size", where);
  c.layers = get_int(j, "num_hidden_layers", where);
  c.heads = get_int(j, "num_attention_heads", where);
  c.kv_heads = get_int(j, "num_key_value_heads", where);
  c.head_dim = j.contains("head_dim") ? get_int(j, "head_dim", where) : (c.heads > 0 ? c.hidden / c.heads : 0);
  c.block_size = get_int(j, "block_size", where);
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.eps = j["rms_norm_eps"].get<float>();
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) c.rope_theta = j["rope_theta"].get<float>();
  // Settings this reader would otherwise ignore and get wrong: refuse them.
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail(where, ": config.json sets rope_scaling, which Pocket's DFlash drafts do not support");
  if (j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean() && j["use_sliding_window"].get<bool>())
    fail(where, ": config.json enables sliding-window attention, which Pocket's DFlash drafts do not support");
  if (target.arch == Arch::Gemma3)
    fail(where, ": DFlash drafts run on Qwen3, Qwen2 and Llama targets, not Gemma 3 (its norms and embedding scale differ)");
  if (!j.contains("dflash_config") || !j["dflash_config"].is_object()) fail(where, ": config.json has no \"dflash_config\"");
  const json& d = j["dflash_config"];
  c.mask_token_id = get_int(d, "mask_token_id", where);
  read_dflash2_settings(j, d, target, c, where);
  if (!d.contains("target_layer_ids") || !d["target_layer_ids"].is_array() || d["target_layer_ids"].empty())
    fail(where, ": dflash_config needs a non-empty \"target_layer_ids\" array");
  for (const auto& v : d["target_layer_ids"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= target.n_layers)
      fail(where, ": target layer id ", v.dump(), " is not a layer of the target (", target.n_layers, " layers)");
    c.target_layer_ids.push_back(v.get<int>());
  }
  if (c.layers < 1 || c.heads < 1 || c.kv_heads < 1 || c.heads % c.kv_heads != 0 || c.head_dim < 2 || c.head_dim % 2 ||
      c.ffn < 1 || c.block_size < 2 || c.block_size > 64)
    fail(where, ": unsupported draft shape (layers ", c.layers, ", heads ", c.heads, "/", c.kv_heads, ", head dim ",
         c.head_dim, ", block ", c.block_size, ")");
  if (c.hidden != target.dim) fail(where, ": draft hidden size ", c.hidden, " but the target's is ", target.dim);
  if (c.mask_token_id >= target.vocab_size)
    fail(where, ": mask token ", c.mask_token_id, " is outside the target's embedding (", target.vocab_size, " rows)");

  const auto& ts = tensors_;
  std::set<std::string> used;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) -> const TensorView* {
    auto it = ts.find(name);
    if (it == ts.end()) fail(where, ": tensor ", name, " is missing");
    if (it->second.shape.size() != 2 || it->second.shape[0] != rows || it->second.shape[1] != cols)
      fail(where, ": tensor ", name, " has the wrong shape (expected ", rows, " x ", cols, ")");
    used.insert(name);
    return &it->second;
  };
  auto vec = [&](const std::string& name, int64_t n) {
    auto it = ts.find(name);
    if (it == ts.end()) fail(where, ": tensor ", name, " is missing");
    used.insert(name);
    return vector_f32(it->second, n, name, where);
  };
  const int64_t H = c.hidden, qd = int64_t{c.heads} * c.head_dim, kvd = int64_t{c.kv_heads} * c.head_dim;
  fc_ = mat("fc.weight", H, H * static_cast<int64_t>(c.target_layer_ids.size()));
  hidden_norm_ = vec("hidden_norm.weight", H);
  norm_ = vec("norm.weight", H);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Layer L;
    L.q = mat(p + "self_attn.q_proj.weight", qd, H);
    L.k = mat(p + "self_attn.k_proj.weight", kvd, H);
    L.v = mat(p + "self_attn.v_proj.weight", kvd, H);
    L.o = mat(p + "self_attn.o_proj.weight", H, qd);
    L.gate = mat(p + "mlp.gate_proj.weight", c.ffn, H);
    L.up = mat(p + "mlp.up_proj.weight", c.ffn, H);
    L.down = mat(p + "mlp.down_proj.weight", H, c.ffn);
    L.in_norm = vec(p + "input_layernorm.weight", H);
    L.post_norm = vec(p + "post_attention_layernorm.weight", H);
    L.q_norm = vec(p + "self_attn.q_norm.weight", c.head_dim);
    L.k_norm = vec(p + "self_attn.k_norm.weight", c.head_dim);
    if (c.dflash2()) {
      const int64_t dyn = int64_t{2} * c.conv_kernel * (H / c.conv_group);
      for (auto [conv, name] : {std::pair{&L.attn_conv, "attention_conv"}, std::pair{&L.mlp_conv, "mlp_conv"}}) {
        const std::string q = p + name + ".";
        conv->kernel_projection = mat(q + "kernel_projection.weight", dyn, H);
        auto it = ts.find(q + "base_kernel");
        if (it != ts.end() && (it->second.shape.size() != 3 || it->second.shape[0] != 2 ||
                               it->second.shape[1] != c.conv_kernel || it->second.shape[2] != H))
          fail(where, ": tensor ", q, "base_kernel has the wrong shape (expected 2 x ", c.conv_kernel, " x ", H, ")");
        conv->base = vec(q + "base_kernel", 2 * c.conv_kernel * H);
      }
    }
    layers_.push_back(std::move(L));
  }
  if (c.dflash2()) {
    const std::string q = "candidate_selector.";
    selector_.predecessor = mat(q + "predecessor_codebook", target.vocab_size, c.selector_rank);
    selector_.successor = mat(q + "successor_codebook", target.vocab_size, c.selector_rank);
    selector_.hidden_projection = mat(q + "hidden_projection.weight", c.selector_rank, H);
  }
  // A tensor this reader does not know (DFlash2's under a DFlash config, a
  // different layer count) would be silently ignored: refuse.
  for (const auto& [name, t] : ts)
    if (!used.count(name))
      fail(where, ": tensor ", name, " is not part of a DFlash", c.dflash2() ? "2" : "",
           " draft of this config (a DFlash2 tensor needs conv_kernel_size, conv_group_size, selector_rank and "
           "selector_top_k in dflash_config)");
}

DFlashDrafter::DFlashDrafter(std::shared_ptr<const DFlashDraft> draft, Session& session, int draft_vocab)
    : draft_(std::move(draft)), session_(session) {
  const DFlashConfig& c = draft_->config();
  const ModelFile& f = session.model().file();
  const ModelConfig& t = session.model().config();
  if (c.hidden != t.dim) fail("DFlash draft hidden size ", c.hidden, " but the target's is ", t.dim);
  embedding_ = &f.get("token_embd.weight");
  output_ = t.tied_embeddings ? embedding_ : &f.get("output.weight");
  const DraftVocab* ranking = draft_->draft_vocab();
  if (draft_vocab == kDraftVocabDefault) draft_vocab = ranking ? std::min<int>(kDefaultDraftVocab, static_cast<int>(ranking->ranked.size())) : 0;
  if (draft_vocab < 0) fail_as(ErrorCode::InvalidArgument, "draft vocabulary size ", draft_vocab, " must be >= 0 (0: the whole vocabulary)");
  if (draft_vocab > 0 && draft_vocab < t.vocab_size) {
    if (!ranking)
      fail_as(ErrorCode::InvalidArgument, "a draft vocabulary of ", draft_vocab,
              " tokens needs a ranking stored with the draft (", kDraftVocabFileName,
              " beside its config.json: pocket draft-vocab); this draft has none");
    if (static_cast<size_t>(draft_vocab) > ranking->ranked.size())
      fail_as(ErrorCode::InvalidArgument, "a draft vocabulary of ", draft_vocab, " tokens, but the draft's ranking holds ",
              ranking->ranked.size(), " (0 uses the whole vocabulary)");
    subset_ = std::make_unique<const SubsetHead>(
        *output_, std::vector<int32_t>(ranking->ranked.begin(), ranking->ranked.begin() + draft_vocab));
    if (c.dflash2() && draft_vocab < c.selector_top_k)
      fail_as(ErrorCode::InvalidArgument, "a draft vocabulary of ", draft_vocab,
              " tokens is smaller than the DFlash2 selector's top-k (", c.selector_top_k, ")");
  }
  session.enable_hidden_taps(c.target_layer_ids);
  // The format's hidden state after the target's last layer is the one after
  // its final norm (Hugging Face's last hidden_states entry).
  const TensorView& fn = f.get("output_norm.weight");
  final_norm_ = vector_f32(fn, t.dim, "output_norm.weight", "DFlash target");
  ctx_k_.resize(static_cast<size_t>(c.layers) * c.kv_heads);
  ctx_v_.resize(ctx_k_.size());
  inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
  for (int i = 0; i < c.head_dim / 2; ++i)
    inv_freq_[static_cast<size_t>(i)] =
        static_cast<float>(std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim));
}

// Context keys/values for positions [ctx_len_, upto): ctx = hidden_norm(fc(taps)),
// then each layer's k_norm(k_proj(ctx)) with RoPE and v_proj(ctx).
void DFlashDrafter::extend_context(std::span<const int32_t> history, int upto) {
  const DFlashConfig& c = draft_->config();
  // Positions whose tokens changed (a new prompt) are recomputed.
  int keep = 0;
  while (keep < ctx_len_ && keep < upto && ctx_tokens_[static_cast<size_t>(keep)] == history[static_cast<size_t>(keep)]) ++keep;
  ctx_len_ = keep;
  ctx_tokens_.resize(static_cast<size_t>(keep));
  const int n = upto - ctx_len_;
  if (n <= 0) return;
  const ModelConfig& target = session_.model().config();
  const int H = c.hidden, kvd = c.kv_heads * c.head_dim, taps = static_cast<int>(c.target_layer_ids.size());
  std::vector<float> fused(static_cast<size_t>(n) * taps * H), ctx(static_cast<size_t>(n) * H);
  for (int i = 0; i < n; ++i) {
    const float* t = session_.hidden_taps(ctx_len_ + i);
    float* row = &fused[static_cast<size_t>(i) * taps * H];
    std::copy(t, t + taps * H, row);
    for (int j = 0; j < taps; ++j)
      if (c.target_layer_ids[static_cast<size_t>(j)] == target.n_layers - 1)
        kernels::rmsnorm(row + j * H, row + j * H, final_norm_.data(), H, target.norm_eps);
  }
  draft_matmul(draft_->fc(), fused.data(), n, ctx.data(), session_.pool());
  for (int i = 0; i < n; ++i)
    kernels::rmsnorm(&ctx[static_cast<size_t>(i) * H], &ctx[static_cast<size_t>(i) * H], draft_->hidden_norm().data(), H, c.eps);
  std::vector<float> k(static_cast<size_t>(n) * kvd), v(k.size());
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = draft_->layer(l);
    draft_matmul(*L.k, ctx.data(), n, k.data(), session_.pool());
    draft_matmul(*L.v, ctx.data(), n, v.data(), session_.pool());
    for (int i = 0; i < n; ++i) {
      float* ki = &k[static_cast<size_t>(i) * kvd];
      for (int h = 0; h < c.kv_heads; ++h) kernels::rmsnorm(ki + h * c.head_dim, ki + h * c.head_dim, L.k_norm.data(), c.head_dim, c.eps);
      kernels::rope(ki, c.kv_heads, c.head_dim, ctx_len_ + i, RopeStyle::Halves, inv_freq_.data());
    }
    store_kv(l, ctx_len_, n, k.data(), v.data());
  }
  ctx_tokens_.insert(ctx_tokens_.end(), history.begin() + ctx_len_, history.begin() + upto);
  ctx_len_ = upto;
}

void DFlashDrafter::store_kv(int l, int pos, int n, const float* k, const float* v) {
  const DFlashConfig& c = draft_->config();
  const int hd = c.head_dim, kvd = c.kv_heads * hd;
  for (int h = 0; h < c.kv_heads; ++h) {
    auto& K = ctx_k_[static_cast<size_t>(l) * c.kv_heads + h];
    auto& V = ctx_v_[static_cast<size_t>(l) * c.kv_heads + h];
    K.resize(static_cast<size_t>(pos + n) * hd);
    V.resize(K.size());
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < hd; ++d) {
        const size_t src = static_cast<size_t>(i) * kvd + static_cast<size_t>(h) * hd + d;
        K[static_cast<size_t>(pos + i) * hd + d] = f32_to_f16(k[src]);
        V[static_cast<size_t>(pos + i) * hd + d] = f32_to_f16(v[src]);
      }
  }
}

const std::vector<float>& DFlashDrafter::block_logits(std::span<const int32_t> history, int rows) {
  const DFlashConfig& c = draft_->config();
  if (rows < 0 || rows > c.block_size - 1) rows = c.block_size - 1;
  if (history.empty()) fail("DFlash draft: empty history");
  const int a = static_cast<int>(history.size()) - 1;  // the anchor's position
  if (static_cast<int>(session_.cached_tokens().size()) < a ||
      !std::equal(history.begin(), history.begin() + a, session_.cached_tokens().begin()))
    fail("DFlash draft: the target's cache does not hold the history before the anchor");
  extend_context(history, a);
  const int B = c.block_size, H = c.hidden, hd = c.head_dim, qd = c.heads * hd, kvd = c.kv_heads * hd;
  const int group = c.heads / c.kv_heads;
  ThreadPool& pool = session_.pool();
  h_.resize(static_cast<size_t>(B) * H);
  x_.resize(h_.size());
  q_.resize(static_cast<size_t>(B) * qd);
  k_.resize(static_cast<size_t>(B) * kvd);
  v_.resize(k_.size());
  attn_.resize(q_.size());
  gate_.resize(static_cast<size_t>(B) * c.ffn);
  up_.resize(gate_.size());
  for (int i = 0; i < B; ++i) kernels::dequant_row(*embedding_, i == 0 ? history[static_cast<size_t>(a)] : c.mask_token_id, &h_[static_cast<size_t>(i) * H]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (c.dflash2()) {
    dyn_.resize(static_cast<size_t>(B) * 2 * c.conv_kernel * (H / c.conv_group));
    conv_.resize(x_.size());
  }
  // DFlash2: the convolution of x_ on `side` with the sublayer's dynamic
  // coefficients (made from its normed input when side is 0), in place.
  auto convolve = [&](const Dflash2Conv& conv, int side) {
    if (!c.dflash2()) return;
    if (side == 0) draft_matmul(*conv.kernel_projection, x_.data(), B, dyn_.data(), pool);
    dflash2_conv(conv, c.conv_kernel, c.conv_group, side, dyn_.data(), x_.data(), B, H, conv_.data());
    x_.swap(conv_);
  };
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = draft_->layer(l);
    for (int i = 0; i < B; ++i) kernels::rmsnorm(&x_[static_cast<size_t>(i) * H], &h_[static_cast<size_t>(i) * H], L.in_norm.data(), H, c.eps);
    convolve(L.attn_conv, 0);
    draft_matmul(*L.q, x_.data(), B, q_.data(), pool);
    draft_matmul(*L.k, x_.data(), B, k_.data(), pool);
    draft_matmul(*L.v, x_.data(), B, v_.data(), pool);
    for (int i = 0; i < B; ++i) {
      float* qi = &q_[static_cast<size_t>(i) * qd];
      float* ki = &k_[static_cast<size_t>(i) * kvd];
      for (int h = 0; h < c.heads; ++h) kernels::rmsnorm(qi + h * hd, qi + h * hd, L.q_norm.data(), hd, c.eps);
      for (int h = 0; h < c.kv_heads; ++h) kernels::rmsnorm(ki + h * hd, ki + h * hd, L.k_norm.data(), hd, c.eps);
      kernels::rope(qi, c.heads, hd, a + i, RopeStyle::Halves, inv_freq_.data());
      kernels::rope(ki, c.kv_heads, hd, a + i, RopeStyle::Halves, inv_freq_.data());
    }
    // Every block query sees the context [0, a) and the whole block: the
    // block's keys/values go after the context's (overwritten by the next
    // context extension), and each KV head's queries (the group's heads at
    // every block position) run through the attention kernel together.
    store_kv(l, a, B, k_.data(), v_.data());
    scores_.resize(static_cast<size_t>(kernels::kMaxAttentionQueries) * (a + B));
    for (int kvh = 0; kvh < c.kv_heads; ++kvh) {
      kernels::AttentionQueries qs;
      auto flush = [&] {
        if (qs.n == 0) return;
        kernels::attention_heads(qs, ctx_k_[static_cast<size_t>(l) * c.kv_heads + kvh].data(),
                                 ctx_v_[static_cast<size_t>(l) * c.kv_heads + kvh].data(), hd, scale, scores_.data());
        qs.n = 0;
      };
      for (int i = 0; i < B; ++i)
        for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
          if (qs.n == kernels::kMaxAttentionQueries) flush();
          const size_t off = static_cast<size_t>(i) * qd + static_cast<size_t>(h) * hd;
          qs.q[qs.n] = &q_[off];
          qs.out[qs.n] = &attn_[off];
          qs.n_ctx[qs.n] = a + B;
          ++qs.n;
        }
      flush();
    }
    draft_matmul(*L.o, attn_.data(), B, x_.data(), pool);
    convolve(L.attn_conv, 1);
    for (size_t j = 0; j < h_.size(); ++j) h_[j] += x_[j];
    for (int i = 0; i < B; ++i) kernels::rmsnorm(&x_[static_cast<size_t>(i) * H], &h_[static_cast<size_t>(i) * H], L.post_norm.data(), H, c.eps);
    convolve(L.mlp_conv, 0);
    draft_matmul(*L.gate, x_.data(), B, gate_.data(), pool);
    draft_matmul(*L.up, x_.data(), B, up_.data(), pool);
    for (int i = 0; i < B; ++i) kernels::swiglu(&gate_[static_cast<size_t>(i) * c.ffn], &up_[static_cast<size_t>(i) * c.ffn], c.ffn);
    draft_matmul(*L.down, gate_.data(), B, x_.data(), pool);
    convolve(L.mlp_conv, 1);
    for (size_t j = 0; j < h_.size(); ++j) h_[j] += x_[j];
  }
  // Rows 1..rows through the final norm and the target's head.
  for (int i = 1; i <= rows; ++i)
    kernels::rmsnorm(&x_[static_cast<size_t>(i - 1) * H], &h_[static_cast<size_t>(i) * H], draft_->norm().data(), H, c.eps);
  const TensorView& head = subset_ ? subset_->view() : *output_;
  logits_.resize(static_cast<size_t>(rows) * logits_width());
  if (rows > 0) draft_matmul(head, x_.data(), rows, logits_.data(), pool);
  if (c.output_multiplier != 1.0f || c.final_logit_softcapping > 0) {
    const float m = c.output_multiplier, cap = c.final_logit_softcapping;
    for (float& z : logits_) z = cap > 0 ? cap * std::tanh(z * m / cap) : z * m;
  }
  return logits_;
}

int DFlashDrafter::logits_width() const { return subset_ ? subset_->size() : session_.model().config().vocab_size; }

void DFlashDrafter::prepare(std::span<const int32_t> history) {
  const auto& cached = session_.cached_tokens();
  if (cached.size() < history.size() || !std::equal(history.begin(), history.end(), cached.begin())) return;
  extend_context(history, static_cast<int>(history.size()));
}

double DFlashDrafter::draft_cost_in_catch_ups(int rows, int context) const {
  const DFlashConfig& c = draft_->config();
  const double H = c.hidden, qd = static_cast<double>(c.heads) * c.head_dim, kvd = static_cast<double>(c.kv_heads) * c.head_dim;
  const double B = c.block_size, taps = static_cast<double>(c.target_layer_ids.size());
  const double per_position = taps * H * H + c.layers * 2.0 * H * kvd;  // fc, then k and v of every layer
  double layer = B * (2.0 * H * qd + 2.0 * H * kvd + 3.0 * H * c.ffn);  // q, o, k, v, the MLP
  layer += B * c.heads * (static_cast<double>(context) + B) * c.head_dim * 2.0;  // scores and values
  if (c.dflash2()) layer += 2.0 * B * H * 2.0 * c.conv_kernel * (H / c.conv_group);  // the two convs' coefficients
  const double rows_out = std::clamp(rows, 1, c.block_size - 1);
  const double head = rows_out * logits_width() * H + (c.dflash2() ? rows_out * H * c.selector_rank : 0.0);
  return (c.layers * layer + head) / per_position;
}

void DFlashDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  out.clear();
  if (max <= 0 || history.empty()) return;
  const int n = std::min(max, draft_->config().block_size - 1);
  const auto& logits = block_logits(history, n);  // only the rows that are drafted go through the head
  const size_t W = static_cast<size_t>(logits_width());
  const DFlashConfig& c = draft_->config();
  if (c.dflash2()) {
    // block_logits left the rows' final-normed hidden states in x_.
    const Dflash2Selector& sel = draft_->selector();
    proj_.resize(static_cast<size_t>(n) * c.selector_rank);
    draft_matmul(*sel.hidden_projection, x_.data(), n, proj_.data(), session_.pool());
    dflash2_select(sel, c.selector_top_k, history.back(), logits, n, static_cast<int>(W),
                   subset_ ? std::span<const int32_t>(subset_->ids()) : std::span<const int32_t>(), proj_,
                   c.selector_rank, out);
    return;
  }
  for (int i = 0; i < n; ++i) out.push_back(token_of(argmax(std::span<const float>(logits).subspan(static_cast<size_t>(i) * W, W))));
}

void DFlashDrafter::draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) {
  std::vector<int32_t> chain;
  draft(history, max_depth, chain);  // leaves the drafted rows' logits in logits_
  out.clear();
  if (chain.empty()) return;
  const size_t W = static_cast<size_t>(logits_width());
  std::vector<std::vector<int32_t>> branches(1, chain);
  for (size_t p = 0; p < std::min(chain.size(), static_cast<size_t>(kTreeBranchPositions)); ++p) {
    std::span<const float> row = std::span<const float>(logits_).subspan(p * W, W);
    int best = -1;
    float top = row[0];
    for (size_t j = 0; j < W; ++j) {
      top = std::max(top, row[j]);
      if (token_of(static_cast<int>(j)) != chain[p] && (best < 0 || row[j] > row[static_cast<size_t>(best)])) best = static_cast<int>(j);
    }
    if (best < 0) continue;
    double z = 0;
    for (float l : row) z += std::exp(static_cast<double>(l) - top);
    if (std::exp(static_cast<double>(row[static_cast<size_t>(best)]) - top) / z < kTreeMinProbability) continue;
    std::vector<int32_t> b(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(p));
    b.push_back(token_of(best));
    b.insert(b.end(), chain.begin() + static_cast<std::ptrdiff_t>(p) + 1, chain.end());
    branches.push_back(std::move(b));
  }
  out.assign(branches, max_nodes);
}

}  // namespace pocket
