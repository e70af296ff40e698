// Options and helpers shared by the pocket subcommands.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "generate/session.h"
#include "runtime/loader.h"

namespace pocket::cli {

// --seed: a 64-bit unsigned seed. CLI11 reads "-1" into an unsigned option
// as 2^64 - 1 (strtoull's wrap-around), so `--seed -1`, which means "a random
// seed" to llama.cpp users, would silently run a fixed seed: a negative value
// is refused by name instead.
void add_seed_option(CLI::App& app, uint64_t& seed, const std::string& description);

// --kv f16|q8|q4: the KV cache's element type. `planned`: the command also
// takes --mem-budget, whose plan chooses the type when --kv is not given.
void add_kv_option(CLI::App& app, std::string& kv, bool planned = false);

struct ModelOptions {
  std::string model;      // -m; empty = default model
  std::string tokenizer;  // --tokenizer
  int threads = 0;        // 0 = all cores
  int context = 0;        // 0 = min(model context, 4096)
  std::string kv;  // --kv (commands that call add_kv_to); empty = f16, or the memory plan's choice
  bool exact_kquants = false;  // --exact-kquants

  void add_to(CLI::App& app);
  void add_kv_to(CLI::App& app) { add_kv_option(app, kv, true); }
  KVType kv_type() const { return kv.empty() ? KVType::F16 : parse_kv_type(kv); }
  bool kv_given() const { return !kv.empty(); }
  // With `budget`, loads under its memory plan (load_model).
  LoadedModel load(std::string* path_out = nullptr, const MemoryRequest* budget = nullptr) const;
  int resolve_threads() const;
  int resolve_context(const ModelConfig& cfg) const;
};

struct GenerationFlags {
  GenerateOptions gen;
  bool quiet = false;
  void add_to(CLI::App& app);
};

// Subcommand registration; each returns the callback's exit code through `rc`.
void add_run(CLI::App& app, int& rc);
void add_chat(CLI::App& app, int& rc);
void add_info(CLI::App& app, int& rc);
void add_tokenize(CLI::App& app, int& rc);
void add_quantize(CLI::App& app, int& rc);
void add_create(CLI::App& app, int& rc);
void add_bench(CLI::App& app, int& rc);
void add_eval(CLI::App& app, int& rc);
void add_prune_vocab(CLI::App& app, int& rc);
void add_convert_draft(CLI::App& app, int& rc);
void add_ngram_build(CLI::App& app, int& rc);
void add_draft_vocab(CLI::App& app, int& rc);
void add_train_head(CLI::App& app, int& rc);
void add_classify(CLI::App& app, int& rc);  // classify and route
void add_rank(CLI::App& app, int& rc);
void add_attach_head(CLI::App& app, int& rc);
void add_serve(CLI::App& app, int& rc);

}  // namespace pocket::cli
