#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "bench/system.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "runtime/loader.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket::bench {

Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stat s;
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

std::vector<int32_t> random_ids(int n, int vocab, uint64_t& state) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    id = static_cast<int32_t>(state % static_cast<uint64_t>(vocab));
  }
  return ids;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes one decode step reads: every weight except the embedding table, one
// embedding row, the output matrix (the embedding table itself when tied),
// and K and V of every layer at `context` positions. Weights count as the
// kernels read them: a GGUF matrix repacked at load by its copy's size.
double decode_bytes(const Model& m, double context, KVType kv, double* kv_part) {
  const ModelFile& f = m.file();
  const ModelConfig& c = f.config;
  const TensorView& emb = f.get("token_embd.weight");
  const double emb_bytes = static_cast<double>(m.run_nbytes("token_embd.weight"));
  double weights = 0;
  for (const auto& [name, t] : f.tensors)
    if (name != "token_embd.weight") weights += static_cast<double>(m.run_nbytes(name));
  weights += emb_bytes / static_cast<double>(emb.rows());
  if (c.tied_embeddings) weights += emb_bytes;
  *kv_part = static_cast<double>(kv_bytes_per_token(c, kv)) * context;
  return weights + *kv_part;
}

void check_sweep(const BenchOptions& opt, const ModelConfig& c) {
  const std::vector<int>& cs = opt.ctx_sweep;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i] < 1) fail("bench: --ctx ", cs[i], " must be at least 1");
    if (i > 0 && cs[i] < cs[i - 1] + opt.gen)
      fail("bench: --ctx values must rise by at least -n (", opt.gen, ") tokens: ", cs[i - 1], " then ", cs[i]);
  }
  if (!cs.empty() && cs.back() + opt.gen > c.max_seq_len)
    fail("bench: --ctx ", cs.back(), " + -n ", opt.gen, " exceeds the model's context of ", c.max_seq_len);
}

// Decode speed at each context of opt.ctx_sweep (see BenchOptions).
std::vector<BenchReport::SweepPoint> run_sweep(const Model& model, const BenchOptions& opt, ThreadPool& pool,
                                               double baseline_rss_mb, const std::function<bool()>& stopped) {
  const ModelConfig& c = model.config();
  const std::vector<int>& cs = opt.ctx_sweep;
  Context ctx(c, cs.back() + opt.gen, opt.kv);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  std::vector<std::vector<double>> rates(cs.size()), fills(cs.size());
  std::vector<BenchReport::SweepPoint> out(cs.size());
  uint64_t rng = opt.seed * 0x9E3779B97F4A7C15ull + 2;
  for (int run = 0; run <= opt.runs && !stopped(); ++run) {  // run 0 is the warm-up
    ctx.cache.clear();
    for (size_t i = 0; i < cs.size() && !stopped(); ++i) {
      out[i].context = cs[i];
      out[i].fill_from = static_cast<int>(ctx.cache.size());
      auto fill = random_ids(cs[i] - ctx.cache.size(), c.vocab_size, rng);
      auto t0 = Clock::now();
      if (!fill.empty()) model.forward(fill, ctx, pool, logits.data());
      const double fill_tok_s = fill.empty() ? 0.0 : static_cast<double>(fill.size()) / seconds_since(t0);
      auto gen = random_ids(opt.gen, c.vocab_size, rng);
      t0 = Clock::now();
      for (int32_t t : gen) model.forward(std::span<const int32_t>(&t, 1), ctx, pool, logits.data());
      const double decode_tok_s = opt.gen / seconds_since(t0);
      if (run == 0) {
        out[i].rss_increase_mb = rss_mb("VmRSS") - baseline_rss_mb;
        continue;
      }
      rates[i].push_back(decode_tok_s);
      if (fill_tok_s > 0) fills[i].push_back(fill_tok_s);
      if (opt.on_sweep) opt.on_sweep(run, cs[i], decode_tok_s, fill_tok_s);
    }
  }
  size_t done = 0;
  while (done < cs.size() && !rates[done].empty()) {
    out[done].decode_tok_s = stat_of(rates[done]);
    if (!fills[done].empty()) out[done].fill_tok_s = stat_of(fills[done]);
    ++done;
  }
  out.resize(done);
  return out;
}

std::string weight_type_summary(const ModelFile& f) {
  std::map<std::string, int> count;
  for (const auto& [name, t] : f.tensors)
    if (t.shape.size() == 2) ++count[std::string(dtype_name(t.type))];
  std::string out;
  for (const auto& [type, n] : count) out += (out.empty() ? "" : ", ") + type + " x" + std::to_string(n);
  return out;
}

}  // namespace

BenchReport run_bench(const std::string& path, const BenchOptions& opt) {
  if (opt.prompt < 1 || opt.gen < 1) fail("bench: -p and -n must be at least 1");
  if (opt.threads < 1) fail("bench: thread count ", opt.threads, " must be at least 1");
  if (opt.runs < 1) fail("bench: runs must be at least 1");
  if (!(opt.watts_per_core > 0)) fail("bench: --watts-per-core must be positive");
  BenchReport r;
  r.path = path;
  r.opt = opt;
  r.baseline_rss_mb = rss_mb("VmRSS");

  // Load time to the first token: open (mmap), build, one 1-token forward.
  auto t0 = Clock::now();
  MemoryRequest budget;
  budget.budget_mb = opt.mem_budget_mb;
  budget.context = opt.prompt + opt.gen;
  budget.threads = opt.threads;
  budget.kv = opt.kv;
  if (opt.mem_budget_mb > 0 && !opt.ctx_sweep.empty())
    fail("bench: --mem-budget and --ctx cannot be combined (the sweep's context is not in the plan)");
  OpenOptions oo;
  oo.exact_kquants = opt.exact_kquants;
  LoadedModel m = load_model(path, oo, {}, opt.mem_budget_mb > 0 ? &budget : nullptr);
  if (m.plan) r.memory_plan = m.plan->describe();
  const Model& model = *m.model;
  const ModelConfig& c = model.config();
  ThreadPool pool(opt.threads);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  {
    Context ctx(c, 8);
    const int32_t first = 0;
    model.forward(std::span<const int32_t>(&first, 1), ctx, pool, logits.data());
  }
  r.load_to_first_token_s = seconds_since(t0);
  r.format = m.file->format;
  r.arch = arch_name(c.arch);
  r.file_size = m.file->file_size;
  r.weight_type = weight_type_summary(*m.file);
  r.kernels = kernels::active_isa();
  const int n_ctx = opt.prompt + opt.gen;
  if (n_ctx > c.max_seq_len) fail("bench: -p + -n = ", n_ctx, " exceeds the model's context of ", c.max_seq_len);
  check_sweep(opt, c);

  std::vector<double> prefill, decode, cpu;
  std::optional<uint64_t> rapl0;
  uint64_t rng = opt.seed * 0x9E3779B97F4A7C15ull + 1;
  // One context for all runs, emptied before each, as an app keeps its
  // session's KV cache: the warm-up run pays the first touch of its pages.
  Context ctx(c, n_ctx, opt.kv);
  auto stopped = [&] { return opt.stop != nullptr && opt.stop->load(std::memory_order_relaxed); };
  // The bandwidth probes run between the runs (after each but the last), so
  // their median follows the host over the same minutes as the runs (a
  // shared VM's bandwidth moves by itself). The probe's buffer must not
  // count in the peak memory: VmHWM is read after each run and reset after
  // each probe, and the peak is the largest reading. Where VmHWM cannot be
  // reset, the probes all run after the runs instead.
  std::vector<double> probes;
  auto probe = [&] { probes.push_back(measure_read_bandwidth(opt.threads, opt.bandwidth_bytes, opt.bandwidth_reps)); };
  double peak_mb = rss_mb("VmHWM");  // loading and the first token count too: read before any reset
  bool interleave = reset_peak_rss();
  for (int run = 0; run <= opt.runs && !stopped(); ++run) {  // run 0 is the warm-up
    auto prompt = random_ids(opt.prompt, c.vocab_size, rng);
    auto gen = random_ids(opt.gen, c.vocab_size, rng);
    ctx.cache.clear();
    if (run == 1) rapl0 = rapl_energy_uj();
    const double cpu0 = process_cpu_seconds();
    auto tp = Clock::now();
    model.forward(prompt, ctx, pool, logits.data());
    const double tp_s = seconds_since(tp);
    auto td = Clock::now();
    for (int32_t t : gen) {
      if (stopped()) break;
      model.forward(std::span<const int32_t>(&t, 1), ctx, pool, logits.data());
    }
    const double td_s = seconds_since(td);
    peak_mb = std::max(peak_mb, rss_mb("VmHWM"));
    if (interleave && run < opt.runs && !stopped()) {
      probe();
      interleave = reset_peak_rss();  // should it stop working, the rest run after the runs
    }
    if (run == 0 || stopped()) continue;  // the warm-up, or a run cut short
    cpu.push_back(process_cpu_seconds() - cpu0);
    prefill.push_back(opt.prompt / tp_s);
    decode.push_back(opt.gen / td_s);
    if (opt.on_run) opt.on_run(run, prefill.back(), decode.back());
  }
  const auto rapl1 = rapl_energy_uj();
  r.runs_completed = static_cast<int>(prefill.size());
  r.interrupted = r.runs_completed < opt.runs;
  if (r.runs_completed == 0) fail("bench: stopped before the first measured run finished (nothing to report)");
  r.prefill_tok_s = stat_of(prefill);
  r.decode_tok_s = stat_of(decode);
  r.cpu_s_per_inference = stat_of(cpu).median;
  r.peak_rss_mb = std::max(peak_mb, rss_mb("VmHWM"));
  r.peak_increase_mb = r.peak_rss_mb - r.baseline_rss_mb;
  r.kv_cache_bytes_per_position = static_cast<double>(kv_bytes_per_token(c, opt.kv));
  // After the peak reading: the sweep's larger cache is not part of it.
  if (!opt.ctx_sweep.empty() && !stopped()) r.sweep = run_sweep(model, opt, pool, r.baseline_rss_mb, stopped);

  if (rapl0 && rapl1) {
    // RAPL counts the whole package, other processes included.
    uint64_t d = *rapl1 >= *rapl0 ? *rapl1 - *rapl0 : *rapl1 + rapl_max_energy_uj().value_or(0) - *rapl0;
    r.energy_j = static_cast<double>(d) * 1e-6 / r.runs_completed;
    r.energy_source = "rapl (package, includes other processes)";
  } else {
    r.energy_j = r.cpu_s_per_inference * opt.watts_per_core;
    r.energy_source = "estimate: " + std::to_string(opt.watts_per_core).substr(0, 4) + " W/core x CPU-seconds";
  }
  r.battery_fraction = r.energy_j / kPhoneBatteryJoules;

  // The mean context of the decode steps is p + (n - 1) / 2 cached positions
  // plus the token itself.
  r.bytes_per_token = decode_bytes(*m.model, opt.prompt + (opt.gen + 1) / 2.0, opt.kv, &r.kv_bytes_per_token);
  r.last_level_cache_bytes = last_level_cache_bytes().value_or(0);
  if (r.interrupted) return r;  // no (further) bandwidth test after a Ctrl-C: report now
  // Probes not yet taken run now, after the peak memory reading (their
  // buffer would count in it).
  r.bandwidth_interleaved = !probes.empty();
  while (static_cast<int>(probes.size()) < opt.runs) probe();
  r.bandwidth = stat_of(probes);
  r.bandwidth_probes = static_cast<int>(probes.size());
  r.bandwidth_bytes_s = r.bandwidth.median;
  r.roofline_tok_s = r.bandwidth_bytes_s / r.bytes_per_token;
  r.bandwidth_fraction = r.decode_tok_s.median * r.bytes_per_token / r.bandwidth_bytes_s;
  return r;
}

}  // namespace pocket::bench
