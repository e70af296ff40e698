// Models with deterministic pseudo-random weights, for tests, benchmarks and
// capacity planning at real shapes when real weights are not at hand.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "formats/model_file.h"

namespace pocket {

struct SyntheticSpec {
  ModelConfig config;
  DType weight_type = DType::F32;  // the big matrices
  DType embed_type = DType::F32;   // token embedding (and the output head when tied)
  DType head_type = DType::F32;    // separate output head
  int group = 32;                  // PQ group size
  uint64_t seed = 1;
};

// Named presets: "pocket-0.3b", "qwen3-0.6b", "gemma3-270m", and small test
// shapes "tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3".
ModelConfig preset_config(const std::string& name);

// Builds the whole model in memory (owned buffers inside the ModelFile).
// The vocabulary is left empty (has_vocab = false).
ModelFile make_synthetic_model(const SyntheticSpec& spec);

// Deterministic values of one named tensor: f32, `rows * cols` entries,
// scaled so activations stay in a sane range through the layers.
std::vector<float> synthetic_tensor(const std::string& name, int64_t rows, int64_t cols, uint64_t seed);

}  // namespace pocket
