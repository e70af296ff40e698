// llama2.c checkpoints: the legacy export (7 x int32 header, fp32 weights,
// freq_cis tables) and the "version 1" export (magic "ak42", 256-byte
// header, fp32 weights). Tensors are views into the mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "formats/model_file.h"

namespace pocket {

// True if the first bytes look like a llama2.c header (v1 magic, or a legacy
// header whose seven fields are all in plausible ranges). Used by
// autodetection so a random file is "not a recognised model file" rather
// than a size error.
bool looks_like_llama2c(const uint8_t* data, size_t size);

// Opens a checkpoint; the tokenizer comes from opts.tokenizer_path or
// tokenizer.bin / tok<vocab>.bin next to the model.
ModelFile open_llama2c(const std::string& path, const OpenOptions& opts);

enum class Llama2cVersion { Legacy, V1 };

// Writes F32 tensors with canonical names (see model_file.h) as a llama2.c
// checkpoint for `c` (Llama, no biases, head_dim = dim / n_heads). The
// classifier is shared when `output.weight` is absent. Throws pocket::Error.
void write_llama2c(const std::string& path, const ModelConfig& c, const std::map<std::string, TensorView>& tensors,
                   Llama2cVersion version);

}  // namespace pocket
