#include "cli_common.h"

#include <cstdio>

#include "util/error.h"

namespace pocket::cli {

void ModelOptions::add_to(CLI::App& app) {
  app.add_option("-m,--model", model, "Model: GGUF, Pocket file, Hugging Face folder, or llama2.c checkpoint");
  app.add_option("--tokenizer", tokenizer, "Tokenizer file (llama2.c tokenizer.bin or tokenizer.json)");
  app.add_option("-t,--threads", threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx-size", context, "Context size in tokens (default: the model's, at most 4096)")
      ->check(CLI::Range(1, 1 << 22));
  app.add_flag("--exact-kquants", exact_kquants,
               "Run GGUF Q4_K / Q5_K weights as stored; by default they run as PQ4 / PQ5 with fp16-rounded sub-block scales "
               "(values within 2^-11 of a scale, several times the prefill speed)");
}

void add_kv_option(CLI::App& app, std::string& kv, bool planned) {
  std::string help =
      "KV cache type: f16 (default), q8 (int8 keys and values, a scale per row: half the memory) or q4 (4-bit, a scale "
      "per row: about a quarter)";
  if (planned) help += "; with --mem-budget and no --kv, the plan chooses f16, or q8 when the context does not fit with f16";
  app.add_option("--kv", kv, help)->check(CLI::IsMember({"f16", "q8", "q4"}));
}

LoadedModel ModelOptions::load(std::string* path_out, const MemoryRequest* budget) const {
  std::string path = model.empty() ? default_model_path(POCKET_SHARED_DIR) : model;
  if (path_out) *path_out = path;
  OpenOptions o;
  o.tokenizer_path = tokenizer;
  o.exact_kquants = exact_kquants;
  LoadedModel m = load_model(path, o, {}, budget);
  for (const std::string& n : m.file->notes) std::fprintf(stderr, "pocket: note: %s\n", n.c_str());
  return m;
}

int ModelOptions::resolve_threads() const { return pocket::resolve_threads(threads); }

int ModelOptions::resolve_context(const ModelConfig& cfg) const { return pocket::resolve_context(context, cfg); }

void add_seed_option(CLI::App& app, uint64_t& seed, const std::string& description) {
  app.add_option("--seed", seed, description)->check(CLI::Validator(
      [](std::string& v) {
        const size_t at = v.find_first_not_of(" \t");
        return at != std::string::npos && v[at] == '-'
                   ? "Value " + v + " is negative: a seed is an integer from 0 to 18446744073709551615"
                   : std::string();
      },
      ""));
}

void GenerationFlags::add_to(CLI::App& app) {
  SamplerConfig& s = gen.sampling;
  app.add_option("-n,--max-tokens", gen.max_tokens, "Maximum tokens to generate")->check(CLI::Range(0, 1 << 22));
  app.add_option("--temp", s.temperature, "Temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-k", s.top_k, "Top-k (0 = off)")->check(CLI::Range(0, 1 << 22));
  app.add_option("--top-p", s.top_p, "Top-p (1 = off)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", s.min_p, "Min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")->check(CLI::Range(0.01, 100.0));
  app.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the repetition penalty looks back")
      ->check(CLI::Range(0, 1 << 22));
  add_seed_option(app, s.seed, "Random seed");
  app.add_option("--stop", gen.stop_strings, "Stop string (repeatable)");
  app.add_flag_function("--ignore-eos", [this](int64_t) { gen.stop_at_eos = false; }, "Do not stop at end-of-sequence tokens");
  app.add_flag("-q,--quiet", quiet, "Do not print statistics to stderr");
}

}  // namespace pocket::cli
