// Output of `pocket bench`: a table for people, one JSON object for tools.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench.h"

namespace pocket::bench {

namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

nlohmann::json stat_json(const Stat& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

}  // namespace

std::string format_table(const BenchReport& r) {
  const BenchOptions& o = r.opt;
  std::string t;
  auto row = [&](const std::string& k, const std::string& v) {
    t += k + std::string(k.size() < 30 ? 30 - k.size() : 1, ' ') + v + "\n";
  };
  row("model", r.path + " (" + r.format + ", " + r.arch + ")");
  row("weights", r.weight_type);
  row("file size", fmt("%.1f MB", r.file_size / 1e6));
  row("threads", std::to_string(o.threads));
  row("kernels", r.kernels);
  row("method", r.interrupted ? "1 warm-up + " + std::to_string(r.runs_completed) + " of " + std::to_string(o.runs) +
                                     " runs (interrupted), median [min, max]"
                               : "1 warm-up + " + std::to_string(o.runs) + " runs, median [min, max]");
  row("load to first token", fmt("%.3f s", r.load_to_first_token_s));
  row("prefill " + std::to_string(o.prompt) + " tokens",
      fmt("%.1f tok/s [%.1f, %.1f]", r.prefill_tok_s.median, r.prefill_tok_s.min, r.prefill_tok_s.max));
  row("decode " + std::to_string(o.gen) + " tokens",
      fmt("%.1f tok/s [%.1f, %.1f]", r.decode_tok_s.median, r.decode_tok_s.min, r.decode_tok_s.max));
  row("peak memory increase", fmt("%.1f MB (baseline %.1f MB, peak %.1f MB)", r.peak_increase_mb, r.baseline_rss_mb,
                                  r.peak_rss_mb));
  if (!r.memory_plan.empty()) row("memory plan", r.memory_plan);
  row("KV cache per token of context",
      fmt("%.0f bytes", r.kv_cache_bytes_per_position) + " (" + kv_type_name(r.opt.kv) + " K and V)");
  for (const auto& sp : r.sweep) {
    std::string fill;
    if (sp.fill_tok_s.median > 0)
      fill = "; prefill " + std::to_string(sp.fill_from) + ".." + std::to_string(sp.context) +
             fmt(" %.1f tok/s", sp.fill_tok_s.median);
    row("decode at context " + std::to_string(sp.context),
        fmt("%.1f tok/s [%.1f, %.1f]", sp.decode_tok_s.median, sp.decode_tok_s.min, sp.decode_tok_s.max) + fill +
            fmt("; memory +%.1f MB", sp.rss_increase_mb));
  }
  row("bytes read per decoded token", fmt("%.1f MB (KV cache %.1f MB)", r.bytes_per_token / 1e6, r.kv_bytes_per_token / 1e6));
  if (r.bandwidth_bytes_s > 0) {
    row("read bandwidth (measured)",
        fmt("%.1f GB/s [%.1f, %.1f]", r.bandwidth.median / 1e9, r.bandwidth.min / 1e9, r.bandwidth.max / 1e9) +
            ", median of " + std::to_string(r.bandwidth_probes) + " probes " +
            (r.bandwidth_interleaved ? "between the runs" : "after the runs"));
    row("decode roofline", fmt("%.1f tok/s; median decode uses %.0f%% of the bandwidth", r.roofline_tok_s,
                               100.0 * r.bandwidth_fraction));
    if (r.last_level_cache_bytes > 0) {
      // Weights that fit in the last-level cache are partly read from it,
      // and a probe not well above it measures the cache too: say so, or
      // "uses 150% of the bandwidth" reads as an error.
      const double llc = static_cast<double>(r.last_level_cache_bytes);
      std::string note = fmt("%.0f MiB", llc / (1 << 20));
      if (r.bytes_per_token < llc)
        note += fmt("; the %.1f MB read per token fit in it, so decode can exceed the probe's rate", r.bytes_per_token / 1e6);
      if (static_cast<double>(o.bandwidth_bytes) < 2 * llc)
        note += fmt("; the probe's %.0f MiB buffer is under twice it, so the probe reads the cache too",
                    static_cast<double>(o.bandwidth_bytes) / (1 << 20));
      row("last-level cache", note);
    }
  } else {
    row("read bandwidth (measured)", "not measured (interrupted)");
  }
  row("CPU time per inference", fmt("%.3f CPU-s", r.cpu_s_per_inference) + " (" + std::to_string(o.prompt) + " in, " + std::to_string(o.gen) + " out)");
  row("energy per inference", fmt("%.2f J, ", r.energy_j) + r.energy_source);
  row("phone battery per inference", fmt("%.5f%% of 5,000 mAh x 3.85 V (1/%.0f)", 100.0 * r.battery_fraction,
                                         r.battery_fraction > 0 ? 1.0 / r.battery_fraction : 0.0));
  return t;
}

std::string format_json(const BenchReport& r) {
  const BenchOptions& o = r.opt;
  nlohmann::json j = {
      {"model", r.path},
      {"format", r.format},
      {"arch", r.arch},
      {"weights", r.weight_type},
      {"file_size_bytes", r.file_size},
      {"threads", o.threads},
      {"kernels", r.kernels},
      {"prompt_tokens", o.prompt},
      {"gen_tokens", o.gen},
      {"runs", o.runs},
      {"runs_completed", r.runs_completed},
      {"interrupted", r.interrupted},
      {"load_to_first_token_s", r.load_to_first_token_s},
      {"prefill_tok_s", stat_json(r.prefill_tok_s)},
      {"decode_tok_s", stat_json(r.decode_tok_s)},
      {"baseline_rss_mb", r.baseline_rss_mb},
      {"peak_rss_mb", r.peak_rss_mb},
      {"peak_rss_increase_mb", r.peak_increase_mb},
      {"memory_plan", r.memory_plan},
      {"bytes_per_token", r.bytes_per_token},
      {"kv_bytes_per_token", r.kv_bytes_per_token},
      {"kv_cache_bytes_per_position", r.kv_cache_bytes_per_position},
      {"kv", kv_type_name(r.opt.kv)},
      {"bandwidth_bytes_s", r.bandwidth_bytes_s},
      {"bandwidth_probes_bytes_s", {{"median", r.bandwidth.median}, {"min", r.bandwidth.min}, {"max", r.bandwidth.max}}},
      {"bandwidth_probes", r.bandwidth_probes},
      {"bandwidth_interleaved", r.bandwidth_interleaved},
      {"last_level_cache_bytes", r.last_level_cache_bytes},
      {"bandwidth_fraction", r.bandwidth_fraction},
      {"roofline_tok_s", r.roofline_tok_s},
      {"cpu_s_per_inference", r.cpu_s_per_inference},
      {"energy_j", r.energy_j},
      {"energy_source", r.energy_source},
      {"watts_per_core", o.watts_per_core},
      {"battery_fraction", r.battery_fraction},
  };
  nlohmann::json sweep = nlohmann::json::array();
  for (const auto& sp : r.sweep)
    sweep.push_back({{"context", sp.context},
                     {"decode_tok_s", stat_json(sp.decode_tok_s)},
                     {"fill_from", sp.fill_from},
                     {"fill_tok_s", stat_json(sp.fill_tok_s)},
                     {"rss_increase_mb", sp.rss_increase_mb}});
  j["ctx_sweep"] = sweep;
  return j.dump(2) + "\n";
}

}  // namespace pocket::bench
