// --mem-budget and --batch for the commands that generate (run, chat): the
// model is loaded under the budget's plan (budget/memory_plan.h), the
// session gets the planned context and prefill chunk, and the peak resident
// memory over the pre-load baseline is reported at the end.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>

#include "cli_common.h"

namespace pocket::cli {

// Loads `model` under a budget of `budget_mb` MiB for `sessions` sessions
// (the request's context, threads and KV type from the model options; the
// KV type is the plan's to choose when --kv was not given) and prints the
// plan and what it chose on stderr. Used by run/chat (MemoryFlags) and serve.
LoadedModel load_planned(const ModelOptions& model, int budget_mb, int batch = 0, int sessions = 1,
                         std::string* path_out = nullptr);

struct MemoryFlags {
  int budget_mb = 0;  // 0 = none
  int batch = 0;      // prompt tokens per forward pass; 0 = Model::kMaxBatch

  void add_to(CLI::App& app);
  bool given() const { return budget_mb > 0; }
  // Loads the model (under the budget, printing the plan as a note).
  LoadedModel load(const ModelOptions& model) const;
  // A session with the planned (or the -c / default) context and the batch.
  std::unique_ptr<Session> session(const LoadedModel& m, const ModelOptions& model) const;
  // A prompt longer than the planned context: an error naming the budget,
  // before any work (Session::check_fits gives it without a budget).
  void check_prompt(size_t tokens, const LoadedModel& m) const;
  // With a budget: "[memory: peak +X MiB over the pre-load baseline of Y MiB; budget B MiB]" on stderr.
  void report() const;

 private:
  mutable double baseline_mb_ = 0;  // VmRSS before the load
};

}  // namespace pocket::cli
