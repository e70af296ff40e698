// `pocket bench`: the model report's benchmark method. One warm-up and N
// measured runs of "prefill p tokens, then decode n tokens continuing from
// that context" through Model::forward with synthetic random token ids and a
// fresh Context per run; medians with min and max; load time to the first
// token; peak memory over the pre-load baseline; bytes read per decoded
// token against the measured memory bandwidth (a probe after each run but
// the last, so the figure follows the host while the runs do; median and
// spread); CPU time and energy.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/kv_cache.h"

namespace pocket::bench {

struct BenchOptions {
  int prompt = 512;  // p: tokens prefilled
  int gen = 128;     // n: tokens decoded after them
  int threads = 1;
  int runs = 5;      // measured runs (after one warm-up)
  double watts_per_core = 5.0;  // energy estimate when RAPL is not readable
  uint64_t bandwidth_bytes = uint64_t{1} << 30;
  int bandwidth_reps = 5;
  uint64_t seed = 1;  // of the random token ids
  bool exact_kquants = false;  // OpenOptions::exact_kquants
  // Decode speed against context: for each context C (ascending, at least
  // `gen` apart) each run fills the cache to C (one prefill of the tokens
  // since the previous C, timed separately) and decodes `gen` tokens there
  // (timed); the same random ids and runs as above.
  std::vector<int> ctx_sweep;
  // Memory budget in MiB (0 = none): the model is loaded under its plan for
  // a context of prompt + gen (budget/memory_plan.h); not with ctx_sweep.
  int mem_budget_mb = 0;
  KVType kv = KVType::F16;  // the KV cache of every run (--kv)
  // Set (e.g. by a Ctrl-C handler) to stop early: the run in progress is
  // dropped and the report covers the runs finished so far.
  const std::atomic<bool>* stop = nullptr;
  // Called after each measured run (1-based) with its prefill and decode rates.
  std::function<void(int run, double prefill_tok_s, double decode_tok_s)> on_run;
  // Called after each context of each measured sweep run (fill_tok_s is 0
  // when nothing was filled: a context only `gen` above the previous one).
  std::function<void(int run, int context, double decode_tok_s, double fill_tok_s)> on_sweep;
};

struct Stat {
  double median = 0, min = 0, max = 0;
};

struct BenchReport {
  std::string path, format, arch, weight_type;
  std::string kernels;  // the kernel level that ran (kernels::active_isa())
  BenchOptions opt;
  int runs_completed = 0;  // opt.runs unless stopped early
  bool interrupted = false;
  uint64_t file_size = 0;
  double load_to_first_token_s = 0;  // open + first 1-token forward
  Stat prefill_tok_s, decode_tok_s;
  double baseline_rss_mb = 0, peak_rss_mb = 0, peak_increase_mb = 0;
  std::string memory_plan;  // with a budget: the plan (MemoryPlan::describe)
  double bytes_per_token = 0;   // weights + one embedding row + KV at the mean context
  double kv_bytes_per_token = 0;  // the KV part of bytes_per_token
  double kv_cache_bytes_per_position = 0;  // what the KV cache stores per token of context (K and V, opt.kv)
  struct SweepPoint {
    int context = 0;
    Stat decode_tok_s;
    // Prefill rate of the fill from where the previous point's decode ended
    // (0 for the first point) to this context: the cost of attention at these
    // positions. Zero when nothing was filled.
    Stat fill_tok_s;
    int fill_from = 0;
    // VmRSS over the pre-load baseline after the warm-up run reached this
    // context (decode included): weights, scratch and the KV pages written
    // so far (the cache's pages become resident as positions are written).
    double rss_increase_mb = 0;
  };
  std::vector<SweepPoint> sweep;  // opt.ctx_sweep, in order
  double bandwidth_bytes_s = 0;   // measured read bandwidth, same thread count: median of the probes
  Stat bandwidth;                 // the probes' median, min and max (bytes/s)
  int bandwidth_probes = 0;
  bool bandwidth_interleaved = false;  // probes between the runs (false: all after them)
  double bandwidth_fraction = 0;  // median decode rate x bytes_per_token / bandwidth
  double roofline_tok_s = 0;      // bandwidth / bytes_per_token
  uint64_t last_level_cache_bytes = 0;  // 0: not known (system.h)
  double cpu_s_per_inference = 0;  // median over runs (prefill p + decode n)
  double energy_j = 0;             // per inference
  std::string energy_source;       // "rapl" or "estimate: W W/core x CPU-seconds"
  double battery_fraction = 0;     // energy_j / (5000 mAh x 3.85 V)
};

// Median, min and max of `v` (not empty).
Stat stat_of(std::vector<double> v);
// `n` pseudo-random token ids below `vocab` (xorshift on `state`).
std::vector<int32_t> random_ids(int n, int vocab, uint64_t& state);

// Phone battery used for the energy comparison: 5,000 mAh at 3.85 V.
inline constexpr double kPhoneBatteryJoules = 5.0 * 3.85 * 3600.0;

// Runs the benchmark on the model at `path`. Throws pocket::Error (also
// when stopped before the first measured run finished).
BenchReport run_bench(const std::string& path, const BenchOptions& opt);

// Human-readable table and one JSON object.
std::string format_table(const BenchReport& r);
std::string format_json(const BenchReport& r);

}  // namespace pocket::bench
