// pocket bench: prefill/decode speed, memory, bandwidth use and energy.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "bench/bench.h"
#include "cli_common.h"
#include "interrupt.h"
#include "speculative/verify_bench.h"

namespace pocket::cli {

namespace {

struct BenchArgs {
  std::string model;
  bench::BenchOptions opt;
  int threads = 0;
  bool json = false;
  std::vector<int> verify;  // --verify: speculative decoding's verify cost instead
};

int run_verify_bench(const BenchArgs& a) {
  speculative_bench::Options o;
  o.blocks = a.verify;
  o.gen = a.opt.gen;
  o.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  install_interrupt_handler();
  o.stop = &interrupt_flag();
  std::fputs(speculative_bench::format_table(speculative_bench::run(a.model, o)).c_str(), stdout);
  return interrupted() ? kInterruptedExit : 0;
}

int run_bench(BenchArgs a) {
  a.opt.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  install_interrupt_handler();
  a.opt.stop = &interrupt_flag();
  a.opt.on_run = [&](int run, double pp, double tg) {
    std::fprintf(stderr, "run %d/%d: prefill %.1f tok/s, decode %.1f tok/s\n", run, a.opt.runs, pp, tg);
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
  sub->add_option("-p,--prompt", a->opt.prompt, "Tokens to prefill (default 512)");
  sub->add_option("-n,--gen", a->opt.gen, "Tokens to decode after the prefill (default 128)");
  sub->add_option("-t,--threads", a->threads, "Threads (default: all cores)");
  sub->add_option("--runs", a->opt.runs, "Measured runs after one warm-up (default 5)");
  sub->add_option("--watts-per-core", a->opt.watts_per_core,
                  "Power per busy core for the energy estimate when RAPL is not readable (default 5)");
  sub->add_option("--bandwidth-bytes", a->opt.bandwidth_bytes, "Bandwidth test buffer in bytes (default 1 GiB)");
  sub->add_flag("--json", a->json, "Print one JSON object instead of a table");
  sub->add_option("--verify", a->verify,
                  "Speculative decoding: cost of verifying K tokens in one forward vs one decode step, and the oracle "
                  "ceiling, for each K given (e.g. --verify 2,4,8,16,32)")
      ->delimiter(',')
      ->check(CLI::Range(1, 33));
  sub->callback([a, &rc] { rc = a->verify.empty() ? run_bench(*a) : run_verify_bench(*a); });
}

}  // namespace pocket::cli
