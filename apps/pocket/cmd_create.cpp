// pocket create: a Pocket file with synthetic weights at a preset's shape.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "convert/create_model.h"

namespace pocket::cli {

namespace {

struct CreateArgs {
  std::string preset, out, weights = "q4", tokenizer;
  uint64_t seed = 1;
  int group = 64;
};

int create(const CreateArgs& a) {
  convert::CreateOptions o;
  o.preset = a.preset;
  o.seed = a.seed;
  o.weights = convert::parse_weight_type(a.weights, "--weights", false);
  o.group = convert::parse_group(a.group, "--group");
  o.tokenizer = a.tokenizer;
  convert::create_model(o, a.out, convert::terminal_progress());
  std::printf("wrote %s (preset %s, seed %llu, %s weights)\n", a.out.c_str(), a.preset.c_str(),
              static_cast<unsigned long long>(a.seed), a.weights.c_str());
  return 0;
}

}  // namespace

void add_create(CLI::App& app, int& rc) {
  auto a = std::make_shared<CreateArgs>();
  CLI::App* sub = app.add_subcommand("create", "Write a Pocket file with deterministic synthetic weights at a preset shape");
  sub->add_option("--preset", a->preset, "pocket-0.3b, qwen3-0.6b, gemma3-270m, tiny-llama, tiny-qwen2, tiny-qwen3 or tiny-gemma3")->required();
  sub->add_option("-o,--output", a->out, "Pocket file to write")->required();
  add_seed_option(*sub, a->seed, "Seed of the synthetic weights (default 1)");
  sub->add_option("--weights", a->weights, "Weight type: q4, q5, q8 or f16 (default q4)");
  sub->add_option("--group", a->group, "Quantization group size: 32, 64 or 128 (default 64)");
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json or a folder with it: use this real vocabulary (and its chat template); the model's "
                  "vocab_size follows it");
  sub->callback([a, &rc] { rc = create(*a); });
}

}  // namespace pocket::cli
