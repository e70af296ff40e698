// One model, many sessions (issue 14): resident memory of 1 versus N
// sessions on one loaded model, and the time to first token of a new session
// with and without a shared prefix (generate/prefix_cache.h).
//
// Memory: VmRSS before loading, after loading, then after each session has
// prefilled `--prompt` random token ids and decoded `--gen` more (so its KV
// pages and scratch are resident, and the first session has touched every
// weight). Time to first token: a new session given system prefix + user
// turn either prefills all of it, or applies the prefix (copy of its KV rows)
// and prefills the user turn only; the two alternate, `--runs` each, median
// [min, max] (the first token's logits ready; sampling one token from them
// is the same in both).
//
// Usage: bench_sessions MODEL [--sessions N] [--prompt P] [--gen G] [--ctx C]
//                             [--prefix S] [--user U] [--runs R] [--threads T]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/system.h"
#include "generate/session.h"
#include "runtime/loader.h"
#include "generate/prefix_cache.h"
#include "util/error.h"

namespace {

using namespace pocket;
using Clock = std::chrono::steady_clock;

double mib(uint64_t kb) { return static_cast<double>(kb) / 1024.0; }
uint64_t rss_kb() { return bench::proc_status_kb("VmRSS").value_or(0); }
uint64_t pss_kb() { return bench::pss_kb().value_or(0); }

std::vector<int32_t> random_ids(int n, int vocab, uint64_t seed) {
  seed = seed * 0x9E3779B97F4A7C15ull + 1;  // xorshift needs a non-zero state
  return bench::random_ids(n, vocab, seed);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_sessions MODEL [--sessions N] [--prompt P] [--gen G] [--ctx C] [--prefix S] "
                         "[--user U] [--runs R] [--threads T]\n");
    return 2;
  }
  int sessions = 4, prompt = 512, gen = 64, ctx = 1024, prefix = 512, user = 32, runs = 5, threads = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    int* dst = k == "--sessions" ? &sessions : k == "--prompt" ? &prompt : k == "--gen" ? &gen : k == "--ctx" ? &ctx
             : k == "--prefix" ? &prefix : k == "--user" ? &user : k == "--runs" ? &runs : k == "--threads" ? &threads
             : nullptr;
    if (!dst || v < 1) fail_as(ErrorCode::InvalidArgument, "bench_sessions: bad option ", k, " ", argv[i + 1]);
    *dst = v;
  }
  if (prompt + gen > ctx || prefix + user > ctx)
    fail_as(ErrorCode::InvalidArgument, "bench_sessions: --ctx ", ctx, " is too small for the prompts");

  const uint64_t rss_before = rss_kb();
  LoadedModel m = load_model(argv[1]);
  const uint64_t rss_loaded = rss_kb();
  const ModelConfig& cfg = m.model->config();
  const int vocab = cfg.vocab_size;
  const double kv_per_token = 2.0 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 2;  // fp16 K and V, no window here
  std::printf("model %s: %d layers, %d KV heads x %d, fp16 KV %.0f bytes/token; %d threads, context %d\n", argv[1],
              cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, kv_per_token, threads, ctx);
  std::printf("RSS before load %.1f MiB, after load %.1f MiB\n", mib(rss_before), mib(rss_loaded));

  // --- memory of 1..N sessions ---
  std::vector<std::unique_ptr<Session>> live;
  std::vector<uint64_t> rss_after;
  for (int i = 0; i < sessions; ++i) {
    live.push_back(std::make_unique<Session>(m.model, m.tokenizer, ctx, threads));
    Session& s = *live.back();
    std::vector<int32_t> seq = random_ids(prompt, vocab, 1000 + i);
    std::span<float> logits = s.prefill(seq);
    for (int g = 0; g < gen; ++g) {
      seq.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      logits = s.prefill(seq);  // reuses all but the new token: one decode step
    }
    rss_after.push_back(rss_kb());
    std::printf("after session %d (%d tokens cached): RSS %.1f MiB (+%.1f MiB over the previous)\n", i + 1,
                static_cast<int>(s.cached_tokens().size()), mib(rss_after.back()),
                mib(rss_after.back() - (i == 0 ? rss_loaded : rss_after[i - 1])));
  }
  const double per_extra = sessions > 1 ? mib(rss_after.back() - rss_after.front()) / (sessions - 1) : 0;
  std::printf("RSS over the pre-load baseline: 1 session %.1f MiB, %d sessions %.1f MiB; each extra session %.1f MiB "
              "(its KV alone: %.1f MiB)\n",
              mib(rss_after.front() - rss_before), sessions, mib(rss_after.back() - rss_before), per_extra,
              kv_per_token * (prompt + gen) / 1048576.0);
  live.clear();

  // --- time to first token with and without the shared prefix ---
  const std::vector<int32_t> system = random_ids(prefix, vocab, 7);
  std::vector<int32_t> full = system;
  for (int32_t t : random_ids(user, vocab, 8)) full.push_back(t);
  Session owner(m.model, m.tokenizer, ctx, threads);
  auto t0 = Clock::now();
  const PrefixCache shared(owner, system);
  const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> cold, warm;
  int same = 0;
  for (int r = 0; r < runs + 1; ++r) {  // run 0 is the warm-up
    Session a(m.model, m.tokenizer, ctx, threads), b(m.model, m.tokenizer, ctx, threads);
    t0 = Clock::now();
    std::span<float> la = a.prefill(full);
    const double ta = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    shared.apply(b);
    std::span<float> lb = b.prefill(full);
    const double tb = std::chrono::duration<double>(Clock::now() - t0).count();
    same += std::max_element(la.begin(), la.end()) - la.begin() == std::max_element(lb.begin(), lb.end()) - lb.begin();
    if (r == 0) continue;
    cold.push_back(ta * 1e3);
    warm.push_back(tb * 1e3);
  }
  const bench::Stat c = bench::stat_of(cold), w = bench::stat_of(warm);
  std::printf("prefix of %d tokens (%.1f MiB snapshot, built in %.0f ms) + user turn of %d tokens, %d runs:\n", prefix,
              static_cast<double>(shared.bytes()) / 1048576.0, build_s * 1e3, user, runs);
  std::printf("  time to first token, full prefill:      %.1f ms [%.1f, %.1f]\n", c.median, c.min, c.max);
  std::printf("  time to first token, shared prefix:     %.1f ms [%.1f, %.1f]  (%.1fx faster)\n", w.median, w.min,
              w.max, c.median / w.median);
  std::printf("  same first token (argmax) in %d of %d runs\n", same, runs + 1);

  // --- memory of N sessions started from the prefix: mapped copy-on-write
  // (PrefixCache) vs each given a copy (a snapshot restored), proportional
  // set size (Pss: a page shared by k mappings counts 1/k each) ---
  const std::string snapshot = owner.snapshot();
  for (int mode = 0; mode < 2; ++mode) {
    const bool cow = mode == 0;
    if (cow && !shared.copy_on_write()) {
      std::printf("copy-on-write prefix: not available on this system\n");
      continue;
    }
    std::vector<std::unique_ptr<Session>> users;
    const uint64_t base = pss_kb();
    for (int i = 0; i < sessions; ++i) {
      users.push_back(std::make_unique<Session>(m.model, m.tokenizer, ctx, threads));
      Session& s = *users.back();
      if (cow)
        shared.apply(s);
      else
        s.restore(reinterpret_cast<const uint8_t*>(snapshot.data()), snapshot.size(), "the prefix snapshot");
      std::vector<int32_t> turn = system;
      for (int32_t t : random_ids(user, vocab, 100 + i)) turn.push_back(t);
      s.prefill(turn);
    }
    std::printf("%d sessions from the %d-token prefix, each + %d own tokens, %s: Pss +%.1f MiB (%.1f MiB each)\n",
                sessions, prefix, user, cow ? "copy-on-write" : "copied", mib(pss_kb() - base),
                mib(pss_kb() - base) / sessions);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sessions: %s\n", e.what());
    return 1;
  }
}
