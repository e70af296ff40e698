// Cost of decisions against a plain prefill (docs/benchmarks.md, "Decision
// heads"): classify = one prefill of the input without the output head, then
// pooling and the head; rank = the query's prefill once, then the
// candidates after it (packed into one batch, each after a copy of the
// query's K/V rows), compared with one plain prefill of query + all
// candidates and with K full prefills.
// Method: one warm-up, then `runs` rounds in which the variants alternate
// (the machine is shared and noisy); medians. Inputs are fixed random token
// ids (the cost does not depend on the text).
//
// Usage: bench_heads MODEL [threads=2] [runs=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "heads/features.h"
#include "heads/head.h"
#include "heads/scorer.h"
#include "runtime/loader.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double time_it(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int32_t> tokens(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : t) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = static_cast<int32_t>(3 + s % static_cast<uint64_t>(vocab - 3));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_heads MODEL [threads=2] [runs=5]\n");
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  pocket::LoadedModel m = pocket::load_model(argv[1]);
  const pocket::ModelConfig& c = m.model->config();
  const int vocab = c.vocab_size;
  pocket::ThreadPool pool(threads);
  pocket::Context ctx(c, 512);
  std::vector<float> logits(static_cast<size_t>(vocab));
  pocket::heads::FeatureRunner runner(m.model, threads, 512);
  pocket::heads::Head head;  // a 10-class linear head on mean-pooled final states
  head.labels = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  head.net.init(c.dim, 0, 10, 1);
  head.mean.assign(static_cast<size_t>(c.dim), 0.0f);
  head.inv_std.assign(static_cast<size_t>(c.dim), 1.0f);
  std::vector<float> feat(static_cast<size_t>(c.dim));
  std::printf("model %s: dim %d, %d layers, vocab %d; %d threads, %d runs (medians)\n", argv[1], c.dim, c.n_layers, vocab,
              threads, runs);

  auto prefill = [&](const std::vector<int32_t>& t) {
    ctx.cache.clear();
    m.model->forward(t, ctx, pool, logits.data());
  };
  // --- classify vs plain prefill -------------------------------------------
  for (int n : {16, 64, 256}) {
    const std::vector<int32_t> t = tokens(n, vocab, static_cast<uint64_t>(n));
    auto classify = [&] {
      runner.features(t, head.features, feat.data());
      volatile float p = head.probabilities(feat.data())[0];
      (void)p;
    };
    prefill(t), classify();  // warm-up
    std::vector<double> a, b;
    for (int r = 0; r < runs; ++r) {
      a.push_back(time_it([&] { prefill(t); }));
      b.push_back(time_it(classify));
    }
    std::printf("classify %3d tokens: prefill %.1f ms, classify %.1f ms, ratio %.3f\n", n, 1e3 * median(a),
                1e3 * median(b), median(b) / median(a));
  }
  // --- rank 20 candidates x 16 tokens after a 64-token query ----------------
  const int K = 20, Lc = 16, Lq = 64;
  const std::vector<int32_t> q = tokens(Lq, vocab, 1000);
  std::vector<std::vector<int32_t>> cands;
  std::vector<int32_t> all = q;
  for (int k = 0; k < K; ++k) {
    cands.push_back(tokens(Lc, vocab, 2000 + static_cast<uint64_t>(k)));
    all.insert(all.end(), cands.back().begin(), cands.back().end());
  }
  std::vector<float> feats(static_cast<size_t>(K) * c.dim);
  auto rank_head = [&] { runner.features_after(q, cands, head.features, feats.data()); };
  auto rank_loglik = [&] { pocket::heads::score_continuations(*m.model, ctx, pool, q, cands, true); };
  auto rank_full = [&] {  // K full prefills of query + candidate (what sharing saves)
    for (const auto& cd : cands) {
      std::vector<int32_t> x = q;
      x.insert(x.end(), cd.begin(), cd.end());
      runner.features(x, head.features, feats.data(), q.size());
    }
  };
  prefill(all), rank_head(), rank_loglik();
  std::vector<double> p, h, l, f;
  for (int r = 0; r < runs; ++r) {
    p.push_back(time_it([&] { prefill(all); }));
    h.push_back(time_it(rank_head));
    l.push_back(time_it(rank_loglik));
    if (r < 3) f.push_back(time_it(rank_full));
  }
  const double base = median(p);
  std::printf("rank %d x %d after %d: prefill of %zu tokens %.1f ms\n", K, Lc, Lq, all.size(), 1e3 * base);
  std::printf("  head scorer (shared query cache)      %.1f ms, ratio %.3f\n", 1e3 * median(h), median(h) / base);
  std::printf("  log-likelihood scorer (shared cache)  %.1f ms, ratio %.3f\n", 1e3 * median(l), median(l) / base);
  std::printf("  head scorer, %d full prefills (3 runs) %.1f ms, ratio %.3f\n", K, 1e3 * median(f), median(f) / base);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_heads: %s\n", e.what());
  return 1;
}
