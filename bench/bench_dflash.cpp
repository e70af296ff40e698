// Draft cost per block of two DFlash drafts on one target, in one process
// (docs/benchmarks.md, "DFlash2 draft cost per block"): after a prefilled
// 64-token prompt, each round times `blocks` calls of the drafter's draft()
// for a whole block (block_size - 1 tokens, the context already extended,
// so only the block's forward, head and token choice are timed) for draft
// A, then for draft B; medians over the rounds (the machine is shared and
// noisy). Both drafts must read the same target layers.
//
// Usage: bench_dflash MODEL DRAFT_A DRAFT_B [threads=2] [runs=7] [blocks=200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "generate/session.h"
#include "runtime/loader.h"
#include "speculative/dflash.h"
#include "util/error.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pocket;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL DRAFT_A DRAFT_B [threads=2] [runs=7] [blocks=200]\n", argv[0]);
    return 2;
  }
  try {
    const int threads = argc > 4 ? std::stoi(argv[4]) : 2, runs = argc > 5 ? std::stoi(argv[5]) : 7,
              blocks = argc > 6 ? std::stoi(argv[6]) : 200;
    LoadedModel m = load_model(argv[1]);
    Session s(m.model, m.tokenizer, 256, threads);
    std::vector<std::unique_ptr<DFlashDrafter>> drafters;
    for (int i = 2; i <= 3; ++i)
      drafters.push_back(std::make_unique<DFlashDrafter>(std::make_shared<const DFlashDraft>(argv[i], m.model->config()), s));
    std::mt19937 rng(7);
    std::vector<int32_t> history(65);
    for (auto& t : history) t = static_cast<int32_t>(rng() % 1000);  // ids present in any vocabulary of interest
    s.prefill(std::span<const int32_t>(history.data(), history.size() - 1));
    std::vector<int32_t> out;
    for (auto& d : drafters) d->draft(history, 64, out);  // context and warm-up
    std::vector<std::vector<double>> ms(drafters.size());
    for (int r = 0; r < runs; ++r)
      for (size_t i = 0; i < drafters.size(); ++i) {
        const auto t0 = Clock::now();
        for (int b = 0; b < blocks; ++b) drafters[i]->draft(history, 64, out);
        ms[i].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / blocks);
      }
    for (size_t i = 0; i < drafters.size(); ++i) {
      std::printf("%s (%s): median %.3f ms per block, rounds", argv[2 + i], drafters[i]->name(), median(ms[i]));
      for (double x : ms[i]) std::printf(" %.3f", x);
      std::printf("\n");
    }
    std::printf("B / A: %.2fx (%d threads, %d rounds of %d blocks)\n", median(ms[1]) / median(ms[0]), threads, runs, blocks);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
