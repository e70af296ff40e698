// pocket bench: prefill/decode speed, memory, bandwidth use and energy.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "bench/bench.h"
#include "bench/constrained.h"
#include "cli_common.h"
#include "constraint_flags.h"
#include "util/mapped_file.h"
#include <filesystem>
#include "interrupt.h"
#include "speculative/verify_bench.h"

namespace pocket::cli {

namespace {

struct BenchArgs {
  std::string model;
  bench::BenchOptions opt;
  int threads = 0;
  bool json = false;
  std::string kv = "f16";
  std::vector<int> verify;  // --verify: speculative decoding's verify cost instead
  CLI::Option* prompt_opt = nullptr;  // -p and --runs: given by the user (--verify keeps its own defaults otherwise)
  CLI::Option* runs_opt = nullptr;
  ConstraintFlags constraint;
  std::string constraint_corpus;  // a folder of JSON Schemas
  std::string constraint_walks;   // where to write the constrained runs' tokens
};

int run_verify_bench(const BenchArgs& a) {
  speculative_bench::Options o;
  o.blocks = a.verify;
  if (a.constraint.given())
    throw CLI::ValidationError("--verify", "measures unconstrained forwards; drop the constraint option");
  o.gen = a.opt.gen;
  if (a.prompt_opt->count() > 0) o.context = a.opt.prompt;
  if (a.runs_opt->count() > 0) o.reps = a.opt.runs;
  o.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  install_interrupt_handler();
  o.stop = &interrupt_flag();
  std::fputs(speculative_bench::format_table(speculative_bench::run(a.model, o)).c_str(), stdout);
  return interrupted() ? kInterruptedExit : 0;
}

// Constrained decoding side by side with free decoding (bench/constrained.h).
int run_constrained(const BenchArgs& a) {
  bench::ConstrainedBenchOptions o;
  o.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  o.gen = a.opt.gen;
  o.runs = a.opt.runs;
  if (a.constraint.given()) o.constraints.emplace_back(constrain::kind_name(a.constraint.spec().kind), a.constraint.spec());
  if (!a.constraint_corpus.empty()) {
    std::vector<std::filesystem::path> files;
    for (auto& e : std::filesystem::directory_iterator(a.constraint_corpus))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      constrain::ConstraintSpec s;
      s.kind = constrain::ConstraintSpec::Kind::JsonSchema;
      s.text = read_text_file(f.string());
      o.constraints.emplace_back(f.filename().string(), s);
    }
  }
  const bench::ConstrainedBenchReport r = bench::run_constrained_bench(a.model, o);
  std::fputs(bench::format_constrained(r).c_str(), stdout);
  if (!a.constraint_walks.empty()) bench::write_constrained_walks(r, a.constraint_walks);
  return 0;
}

int run_bench(BenchArgs a) {
  if (a.constraint.given() || !a.constraint_corpus.empty()) return run_constrained(a);
  a.opt.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  a.opt.kv = parse_kv_type(a.kv);
  install_interrupt_handler();
  a.opt.stop = &interrupt_flag();
  a.opt.on_run = [&](int run, double pp, double tg) {
    std::fprintf(stderr, "run %d/%d: prefill %.1f tok/s, decode %.1f tok/s\n", run, a.opt.runs, pp, tg);
  };
  a.opt.on_sweep = [&](int run, int context, double tg, double fill) {
    std::fprintf(stderr, "sweep run %d/%d: decode at context %d %.1f tok/s (fill %.1f tok/s)\n", run, a.opt.runs,
                 context, tg, fill);
  };
  bench::BenchReport r = bench::run_bench(a.model, a.opt);
  std::fputs((a.json ? bench::format_json(r) : bench::format_table(r)).c_str(), stdout);
  return r.interrupted ? kInterruptedExit : 0;
}

}  // namespace

void add_bench(CLI::App& app, int& rc) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure prefill and decode speed, memory, bandwidth use and energy");
  sub->add_option("-m,--model", a->model, "Model file or folder")->required();
  a->prompt_opt = sub->add_option("-p,--prompt", a->opt.prompt, "Tokens to prefill (default 512)");
  sub->add_option("-n,--gen", a->opt.gen, "Tokens to decode after the prefill (default 128)");
  sub->add_option("-t,--threads", a->threads, "Threads (default: all cores)");
  a->runs_opt = sub->add_option("--runs", a->opt.runs, "Measured runs after one warm-up (default 5)");
  sub->add_option("--watts-per-core", a->opt.watts_per_core,
                  "Power per busy core for the energy estimate when RAPL is not readable (default 5)");
  sub->add_option("--bandwidth-bytes", a->opt.bandwidth_bytes, "Bandwidth test buffer in bytes (default 1 GiB)");
  sub->add_option("--ctx", a->opt.ctx_sweep,
                  "Also decode -n tokens at each of these contexts, e.g. 128,512,1024,2048,4096 (ascending)")
      ->delimiter(',');
  sub->add_option("--mem-budget", a->opt.mem_budget_mb,
                  "Memory budget in MiB: load under its plan for a context of -p + -n (else an error giving the numbers)")
      ->check(CLI::Range(1, 1 << 24));
  add_kv_option(*sub, a->kv);
  sub->add_flag("--json", a->json, "Print one JSON object instead of a table");
  sub->add_flag("--exact-kquants", a->opt.exact_kquants, "Run GGUF Q4_K / Q5_K weights as stored (default: as PQ4 / PQ5, see `pocket run --help`)");
  CLI::Option* verify =
      sub->add_option("--verify", a->verify,
                      "Speculative decoding: cost of verifying K tokens in one forward vs one decode step, and the "
                      "oracle ceiling (-n tokens), for each K given (e.g. --verify 2,4,8,16,32); over a context of "
                      "-p tokens (default here 256), the median of --runs timings (default here 7)")
          ->delimiter(',')
          ->check(CLI::Range(1, 33));
  a->constraint.add_to(*sub, "--any-json");
  sub->add_option("--constraint-corpus", a->constraint_corpus,
                  "Bench constrained decoding with every JSON Schema (*.json) in this folder");
  sub->add_option("--constraint-walks", a->constraint_walks,
                  "Write every constrained run's tokens to this JSON file ({\"schema#run\": [ids]}, for "
                  "bench_constrain_masks)");
  // What the verify measurement does not use: refused rather than ignored.
  for (const char* name : {"--json", "--ctx", "--mem-budget", "--kv", "--bandwidth-bytes", "--watts-per-core",
                           "--exact-kquants", "--constraint-corpus", "--constraint-walks"})
    verify->excludes(sub->get_option(name));
  sub->callback([a, &rc] { rc = a->verify.empty() ? run_bench(*a) : run_verify_bench(*a); });
}

}  // namespace pocket::cli
