#include "heads/features.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "formats/content_hash.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::heads {

std::string apply_template(const std::string& tmpl, const std::string& text) {
  if (tmpl.empty()) return text;
  const std::string key = "{text}";
  if (tmpl.find(key) == std::string::npos) fail("prompt template '", tmpl, "' has no {text} placeholder");
  std::string out;
  size_t b = 0;
  for (size_t at; (at = tmpl.find(key, b)) != std::string::npos; b = at + key.size()) out += tmpl.substr(b, at - b) + text;
  return out + tmpl.substr(b);
}

void bag_of_tokens(std::span<const int32_t> ids, int buckets, float* out) {
  if (buckets < 1) fail("a bag of tokens needs at least one bucket");
  std::fill(out, out + buckets, 0.0f);
  const float w = ids.empty() ? 0.0f : 1.0f / static_cast<float>(ids.size());
  for (int32_t id : ids) out[static_cast<uint32_t>(id) % static_cast<uint32_t>(buckets)] += w;
}

void pool_rows(const float* rows, int n, int dim, Pooling p, float* out) {
  if (p == Pooling::Last) {
    std::memcpy(out, rows + static_cast<size_t>(n - 1) * dim, static_cast<size_t>(dim) * sizeof(float));
    return;
  }
  std::vector<double> acc(static_cast<size_t>(dim), 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j) acc[j] += rows[static_cast<size_t>(i) * dim + j];
  for (int j = 0; j < dim; ++j) out[j] = static_cast<float>(acc[j] / n);
}

FeatureRunner::FeatureRunner(std::shared_ptr<const Model> model, int threads, int max_tokens)
    : model_(std::move(model)), pool_(std::make_unique<ThreadPool>(threads)), ctx_(model_->config(), max_tokens) {}

void FeatureRunner::append_and_pool(std::span<const int32_t> tokens, const FeatureSpec& spec, float* out,
                                    size_t pool_from) {
  const int d = dim(), n = static_cast<int>(tokens.size());
  if (n == 0 || pool_from >= tokens.size()) fail("an input has no tokens to pool");
  const HiddenTaps taps = taps_into_rows(spec, n);
  model_->forward_hidden(tokens, ctx_, *pool_, taps);
  pool_rows(rows_.data() + pool_from * d, n - static_cast<int>(pool_from), d, spec.pooling, out);
}

void FeatureRunner::features(std::span<const int32_t> tokens, const FeatureSpec& spec, float* out, size_t pool_from) {
  if (spec.kind == FeatureSpec::Kind::Tokens) {
    bag_of_tokens(tokens.subspan(pool_from), spec.buckets, out);
    return;
  }
  ctx_.cache.clear();
  append_and_pool(tokens, spec, out, pool_from);
}

HiddenTaps FeatureRunner::taps_into_rows(const FeatureSpec& spec, int n) {
  rows_.resize(static_cast<size_t>(n) * dim());
  HiddenTaps taps;
  if (spec.layer < 0) {
    taps.final_normed = rows_.data();
  } else {
    taps.layer = spec.layer;
    taps.layer_out = rows_.data();
  }
  return taps;
}

PackedCandidates pack_after_prefix(const ModelConfig& c, KVCache& cache, int q,
                                   const std::vector<std::vector<int32_t>>& candidates, size_t begin, size_t end,
                                   bool drop_last) {
  PackedCandidates p;
  int region = 0;  // the first candidate uses the prefix where it is
  for (size_t k = begin; k < end; ++k) {
    const int n = static_cast<int>(candidates[k].size()) - (drop_last ? 1 : 0);
    if (k > begin && n > 0 && q > 0) {  // a copy of the prefix's K/V rows in front of this candidate
      for (int l = 0; l < c.n_layers; ++l) cache.move_rows(l, region, 0, q);
    }
    for (int t = 0; t < n; ++t) {
      p.tokens.push_back(candidates[k][static_cast<size_t>(t)]);
      p.pos.push_back(q + t);
      p.slot.push_back(region + q + t);
      p.first.push_back(region);
    }
    p.rows.push_back(std::max(n, 0));
    region += q + std::max(n, 0);
  }
  return p;
}

void for_each_packed_group(int q, const std::vector<std::vector<int32_t>>& candidates, int capacity, int max_rows,
                           bool drop_last, const std::function<void(size_t, size_t)>& fn) {
  size_t begin = 0;
  int used = 0, rows = 0;
  for (size_t k = 0; k < candidates.size(); ++k) {
    const int n = static_cast<int>(candidates[k].size()) - (drop_last ? 1 : 0);
    if (q + n > capacity)
      fail("the input needs ", q + n, " tokens of context but the context holds ", capacity,
           " (raise the context size or shorten the prompt)");
    if (k > begin && (used + q + n > capacity || rows + n > max_rows)) fn(begin, k), begin = k, used = 0, rows = 0;
    used += q + n, rows += n;
  }
  if (begin < candidates.size()) fn(begin, candidates.size());
}

void FeatureRunner::features_after(std::span<const int32_t> prefix, const std::vector<std::vector<int32_t>>& candidates,
                                   const FeatureSpec& spec, float* out) {
  ctx_.cache.clear();
  const int q = static_cast<int>(prefix.size());
  if (q > 0) model_->forward(prefix, ctx_, *pool_, nullptr);
  if (model_->packable()) {
    // Candidates in groups that fit the context, each group one batch: every
    // candidate sees a copy of the prefix and its own tokens only.
    for (const auto& cand : candidates)
      if (cand.empty()) fail("an input has no tokens to pool");
    const int d = dim();
    for_each_packed_group(q, candidates, ctx_.cache.capacity(), 1 << 30, false, [&](size_t begin, size_t end) {
      const PackedCandidates p = pack_after_prefix(model_->config(), ctx_.cache, q, candidates, begin, end, false);
      const HiddenTaps taps = taps_into_rows(spec, static_cast<int>(p.tokens.size()));
      model_->forward_packed(p.tokens, p.view(), ctx_, *pool_, &taps);
      size_t row = 0;
      for (size_t k = begin; k < end; ++k) {
        const int n = p.rows[k - begin];
        pool_rows(rows_.data() + row * d, n, d, spec.pooling, out + k * static_cast<size_t>(d));
        row += static_cast<size_t>(n);
      }
    });
    return;
  }
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (ctx_.cache.size() != q) {
      if (q >= ctx_.cache.rollback_limit()) {
        ctx_.cache.truncate(q);
      } else {  // a sliding window moved past the prefix: run it again
        ctx_.cache.clear();
        model_->forward(prefix, ctx_, *pool_, nullptr);
      }
    }
    append_and_pool(candidates[c], spec, out + c * static_cast<size_t>(dim()));
  }
}

std::vector<int32_t> encode_input(const Tokenizer& tok, const Example& e, const FeatureSpec& spec, int max_tokens,
                                  size_t* pair_split) {
  EncodeOptions eo;
  eo.add_bos = tok.vocab().add_bos;
  std::vector<int32_t> ids;
  if (e.query.empty()) {
    ids = tok.encode(apply_template(spec.prompt_template, e.text), eo);
    if (ids.empty()) fail("the input '", e.text.substr(0, 40), "' has no tokens");
    if (static_cast<int>(ids.size()) > max_tokens) ids.resize(static_cast<size_t>(max_tokens));
    if (pair_split) *pair_split = 0;
    return ids;
  }
  ids = tok.encode(apply_template(spec.prompt_template, e.query), eo);
  std::vector<int32_t> cand = tok.encode(e.text);
  if (cand.empty()) fail("the candidate '", e.text.substr(0, 40), "' has no tokens");
  const size_t half = static_cast<size_t>(max_tokens) / 2;
  if (ids.size() + cand.size() > static_cast<size_t>(max_tokens)) {  // keep both parts, each at most half when needed
    if (cand.size() > half && ids.size() > half) cand.resize(half), ids.resize(static_cast<size_t>(max_tokens) - half);
    else if (cand.size() > half) cand.resize(static_cast<size_t>(max_tokens) - ids.size());
    else ids.resize(static_cast<size_t>(max_tokens) - cand.size());
  }
  if (pair_split) *pair_split = ids.size();
  ids.insert(ids.end(), cand.begin(), cand.end());
  return ids;
}

std::function<void(int64_t)> progress_printer(const std::string& label, int64_t total, bool on) {
  if (!on || total <= 0) return [](int64_t) {};
  const bool tty = isatty(STDERR_FILENO);
  struct State {
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now(), last;
    int last_decile = -1;
    std::mutex mu;
  };
  auto s = std::make_shared<State>();
  return [=](int64_t done) {
    std::lock_guard<std::mutex> lock(s->mu);
    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - s->t0).count();
    const int decile = static_cast<int>(done * 10 / total);
    const bool end = done >= total;
    if (tty ? (!end && std::chrono::duration<double>(now - s->last).count() < 0.25) : (decile == s->last_decile && !end))
      return;
    s->last = now, s->last_decile = decile;
    const double rate = el > 0 ? static_cast<double>(done) / el : 0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    std::fprintf(stderr, "%s  %s %lld/%lld (%d%%), %.1f/s, %s %.0fs%s", tty ? "\r" : "", label.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), static_cast<int>(done * 100 / total), rate,
                 end ? "took" : "ETA", end ? el : eta, tty && !end ? "   " : "\n");
    std::fflush(stderr);
  };
}

std::string feature_cache_path(const std::string& dir, const std::string& model_hash, const FeatureSpec& spec,
                               const std::vector<Example>& data, int max_tokens, const std::string& kind) {
  std::string key = "v1|" + model_hash + "|" + kind + "|" + pooling_name(spec.pooling) + "|" + std::to_string(spec.layer) +
                    "|" + std::to_string(max_tokens) + "|" + spec.prompt_template + "|";
  uint64_t h = hash64(key.data(), key.size());
  for (const Example& e : data) {
    h = hash64(e.query.data(), e.query.size(), h);
    h = hash64(e.text.data(), e.text.size(), h ^ 0x5A5A);
  }
  return dir + "/" + model_hash + "-" + hex64(h) + ".feat";
}

bool read_feature_cache(const std::string& path, int64_t rows, int cols, Matrix& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[8];
  int64_t r = 0, c = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&r), 8);
  in.read(reinterpret_cast<char*>(&c), 8);
  if (!in || std::memcmp(magic, "PKFEAT01", 8) != 0 || r != rows || c != cols) return false;
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) != 24 + static_cast<uint64_t>(rows) * cols * sizeof(float)) return false;
  out.rows = rows, out.cols = cols;
  out.data.resize(static_cast<size_t>(rows) * cols);
  in.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(out.data.size() * sizeof(float)));
  return static_cast<bool>(in);
}

void write_feature_cache(const std::string& path, const Matrix& m) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file_atomically(path, [&](std::ostream& out) {
    int64_t r = m.rows, c = m.cols;
    out.write("PKFEAT01", 8);
    out.write(reinterpret_cast<const char*>(&r), 8);
    out.write(reinterpret_cast<const char*>(&c), 8);
    out.write(reinterpret_cast<const char*>(m.data.data()), static_cast<std::streamsize>(m.data.size() * sizeof(float)));
  });
}

Matrix extract_features(std::shared_ptr<const Model> model, const Tokenizer& tok, const std::vector<Example>& data,
                        const FeatureSpec& spec, const ExtractOptions& opt) {
  if (spec.kind == FeatureSpec::Kind::Tokens) {
    Matrix m;
    m.rows = static_cast<int64_t>(data.size()), m.cols = spec.buckets;
    m.data.resize(static_cast<size_t>(m.rows) * static_cast<size_t>(std::max(spec.buckets, 0)));
    for (int64_t i = 0; i < m.rows; ++i) {
      size_t split = 0;
      std::vector<int32_t> ids = encode_input(tok, data[static_cast<size_t>(i)], spec, opt.max_tokens, &split);
      bag_of_tokens(std::span<const int32_t>(ids).subspan(split), spec.buckets, m.row(i));
    }
    return m;
  }
  const int dim = model->config().dim;
  if (spec.layer >= model->config().n_layers)
    fail("layer ", spec.layer, " does not exist (the model has layers 0..", model->config().n_layers - 1, ")");
  Matrix m;
  std::string cache;
  if (!opt.cache_dir.empty()) {
    if (opt.model_hash.empty()) fail("a feature cache needs the model's content hash");
    cache = feature_cache_path(opt.cache_dir, opt.model_hash, spec, data, opt.max_tokens, "hidden");
    if (read_feature_cache(cache, static_cast<int64_t>(data.size()), dim, m)) {
      if (opt.progress) std::fprintf(stderr, "  %s: %zu rows from the cache %s\n", opt.progress_label.c_str(), data.size(), cache.c_str());
      return m;
    }
  }
  m.rows = static_cast<int64_t>(data.size()), m.cols = dim;
  m.data.assign(static_cast<size_t>(m.rows) * dim, 0.0f);
  const int workers = std::max(1, std::min<int>(opt.threads, static_cast<int>(std::max<int64_t>(m.rows, 1))));
  std::atomic<int64_t> next{0}, done{0};
  auto report = progress_printer(opt.progress_label, m.rows, opt.progress);
  std::mutex err_mu;
  std::string error;
  auto work = [&] {
    try {
      FeatureRunner runner(model, 1, opt.max_tokens);
      for (int64_t i; (i = next.fetch_add(1)) < m.rows;) {
        const Example& e = data[static_cast<size_t>(i)];
        size_t split = 0;
        std::vector<int32_t> ids = encode_input(tok, e, spec, opt.max_tokens, &split);
        runner.features(ids, spec, m.row(i), split);
        report(done.fetch_add(1) + 1);
      }
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (error.empty()) error = ex.what();
      next.store(m.rows);
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (!error.empty()) fail(error);
  if (!cache.empty()) write_feature_cache(cache, m);
  return m;
}

}  // namespace pocket::heads
