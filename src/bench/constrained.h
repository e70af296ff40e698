// `pocket bench` with a constraint: constrained decoding side by side with
// free decoding on the same model, threads and prompt. For each constraint
// and run: a constrained generation (temperature sampling, fixed seed), then
// a free one of the same token count (end-of-sequence ignored), in
// alternating order; decode rates as medians; every token's mask time
// (distribution over all constraints) and each constraint's compile time
// (grammar only; the vocabulary index is built once per tokenizer and
// reported apart).
#pragma once
#include <string>
#include <vector>

#include "constrain/constraint.h"

namespace pocket::bench {

struct ConstrainedBenchOptions {
  std::vector<std::pair<std::string, constrain::ConstraintSpec>> constraints;  // (name, spec)
  std::string prompt = "Answer in JSON:";
  int gen = 128;     // token budget of each constrained run
  int threads = 1;
  int runs = 3;
  uint64_t seed = 1;
  int ctx = 1024;
};

struct ConstrainedResult {
  std::string name;
  double compile_ms = 0;
  double free_tok_s = 0, constrained_tok_s = 0;  // medians over runs
  int tokens = 0;                                // of the last constrained run
  bool complete = false;
};

struct ConstrainedBenchReport {
  std::string path;
  double vocab_index_ms = 0;
  int vocab_size = 0;
  std::vector<ConstrainedResult> results;
  std::vector<float> mask_us;  // every constrained token, all constraints and runs
  // Every constrained run's tokens, named "<constraint>#<run>" (the walks
  // bench_constrain_masks replays: the states random output reaches).
  std::vector<std::pair<std::string, std::vector<int32_t>>> walks;
  double free_tok_s = 0, constrained_tok_s = 0, ratio = 0;  // medians of the per-constraint figures
  double compile_median_ms = 0, compile_max_ms = 0;
};

ConstrainedBenchReport run_constrained_bench(const std::string& model_path, const ConstrainedBenchOptions& opt);
std::string format_constrained(const ConstrainedBenchReport& r);
// The walks as one JSON object {"name#run": [token ids]}, written to `path`
// through a temporary file.
void write_constrained_walks(const ConstrainedBenchReport& r, const std::string& path);

}  // namespace pocket::bench
