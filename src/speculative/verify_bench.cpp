#include "speculative/verify_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "kernels/kernels.h"
#include "runtime/loader.h"
#include "speculative/drafter.h"
#include "speculative/speculative.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::speculative_bench {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

bool stopped(const Options& o) { return o.stop && o.stop->load(); }

std::vector<int32_t> ids(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((seed >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

}  // namespace

Report run(const std::string& model_path, const Options& opt) {
  for (int k : opt.blocks)
    if (k < 1 || k > 33) fail_as(ErrorCode::InvalidArgument, "verify block ", k, " must be in 1..33");
  if (opt.context < 1 || opt.gen < 1 || opt.reps < 1 || opt.threads < 1)
    fail_as(ErrorCode::InvalidArgument, "context, generated tokens, repetitions and threads must be >= 1");
  LoadedModel m = load_model(model_path);
  const ModelConfig& cfg = m.model->config();
  const int max_k = std::max(1, *std::max_element(opt.blocks.begin(), opt.blocks.end()));
  const int n_ctx = opt.context + std::max(max_k, opt.gen) + 2;
  if (cfg.max_seq_len > 0 && n_ctx > cfg.max_seq_len)
    fail_as(ErrorCode::InvalidArgument, "verify bench: a context of ", opt.context, " + ", std::max(max_k, opt.gen) + 2,
            " tokens (the largest block or the oracle's -n, and 2) exceeds the model's context of ", cfg.max_seq_len);
  Report r;
  r.path = model_path;
  r.isa = kernels::active_isa();
  r.threads = opt.threads;
  r.context = opt.context;
  r.gen = opt.gen;

  // Verify cost: the cache holds `context` tokens; each timed forward is
  // rolled back, sizes alternate within a repetition so drift hits all alike.
  {
    ThreadPool pool(opt.threads);
    Context ctx(cfg, n_ctx);
    std::vector<float> logits(static_cast<size_t>(max_k) * cfg.vocab_size);
    auto prompt = ids(opt.context, cfg.vocab_size, 1);
    m.model->forward(prompt, ctx, pool, logits.data());
    auto block = ids(max_k, cfg.vocab_size, 2);
    std::vector<int> sizes = {1};
    sizes.insert(sizes.end(), opt.blocks.begin(), opt.blocks.end());
    std::vector<std::vector<double>> ms(sizes.size()), tree_ms(sizes.size());
    const bool trees = m.model->packable();
    // A tree of k nodes: the root, then three chains hanging from it.
    auto tree_parents = [](int k) {
      std::vector<int> p(static_cast<size_t>(k));
      const int per = std::max(1, (k - 1 + 2) / 3);
      for (int i = 0; i < k; ++i) p[static_cast<size_t>(i)] = i == 0 ? -1 : ((i - 1) % per == 0 ? 0 : i - 1);
      return p;
    };
    for (int rep = -1; rep < opt.reps && !stopped(opt); ++rep)  // rep -1: warm-up
      for (size_t i = 0; i < sizes.size(); ++i) {
        auto t0 = Clock::now();
        m.model->forward(std::span(block.data(), static_cast<size_t>(sizes[i])), ctx, pool, logits.data(), true);
        const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        ctx.cache.truncate(opt.context);
        if (rep >= 0) ms[i].push_back(t);
        if (!trees || sizes[i] < 2) continue;
        const auto parents = tree_parents(sizes[i]);
        t0 = Clock::now();
        m.model->forward_tree(std::span(block.data(), static_cast<size_t>(sizes[i])), parents, ctx, pool, logits.data());
        const double tt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (rep >= 0) tree_ms[i].push_back(tt);
      }
    r.decode_ms = median(ms[0]);
    for (size_t i = 1; i < sizes.size(); ++i) {
      Row row;
      row.k = sizes[i];
      row.verify_ms = median(ms[i]);
      row.cost = r.decode_ms > 0 ? row.verify_ms / r.decode_ms : 0;
      row.tree_ms = median(tree_ms[i]);
      row.tree_cost = r.decode_ms > 0 ? row.tree_ms / r.decode_ms : 0;
      r.rows.push_back(row);
    }
  }

  // Oracle ceiling: plain greedy generation, then the same with a drafter
  // replaying it at draft length k - 1 (blocks of k tokens), not adaptive.
  Session session(m.model, m.tokenizer, n_ctx, opt.threads);
  GenerateOptions go;
  go.max_tokens = opt.gen;
  go.sampling.temperature = 0;
  go.stop_at_eos = false;
  auto prompt = ids(opt.context, std::min(cfg.vocab_size, m.tokenizer->vocab_size()), 3);
  std::vector<double> plain;
  std::vector<int32_t> seq;
  for (int rep = 0; rep < 3 && !stopped(opt); ++rep) {
    session.reset();
    GenerateResult g = session.generate(prompt, go);
    plain.push_back(g.tokens.size() / g.decode_seconds);
    seq.assign(prompt.begin(), prompt.end());
    seq.insert(seq.end(), g.tokens.begin(), g.tokens.end());
  }
  r.plain_tok_s = median(plain);
  ReplayDrafter oracle(seq);
  for (Row& row : r.rows) {
    if (row.k < 2 || stopped(opt)) continue;
    std::vector<double> rates;
    for (int rep = 0; rep < 3 && !stopped(opt); ++rep) {
      session.reset();
      GenerateResult g = generate_speculative(session, oracle, prompt, go, {row.k - 1, false});
      rates.push_back(g.tokens.size() / g.decode_seconds);
    }
    row.oracle_tok_s = median(rates);
    row.oracle_speedup = r.plain_tok_s > 0 ? row.oracle_tok_s / r.plain_tok_s : 0;
  }
  return r;
}

std::string format_table(const Report& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "model %s | %s | %d threads | context %d\n", r.path.c_str(), r.isa.c_str(),
                r.threads, r.context);
  out += line;
  std::snprintf(line, sizeof line, "decode step %.2f ms | plain greedy %.1f tok/s (%d tokens)\n", r.decode_ms,
                r.plain_tok_s, r.gen);
  out += line;
  out += "| k (verify block) | verify ms | x decode step | tree of k ms | x decode step | oracle tok/s (draft k-1) | oracle speed-up |\n";
  out += "|---|---|---|---|---|---|---|\n";
  for (const Row& row : r.rows) {
    std::snprintf(line, sizeof line, "| %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.2fx |\n", row.k, row.verify_ms, row.cost,
                  row.tree_ms, row.tree_cost, row.oracle_tok_s, row.oracle_speedup);
    out += line;
  }
  return out;
}

}  // namespace pocket::speculative_bench
