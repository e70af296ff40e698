// Hugging Face model folders: config.json + model.safetensors (or shards
// listed in model.safetensors.index.json) + tokenizer.json.
#pragma once
#include <string>

#include "formats/model_file.h"

namespace pocket {

// Opens the folder `dir`; tensors get canonical names (see model_file.h).
ModelFile open_hf_folder(const std::string& dir, const OpenOptions& opts);

// Canonical name of a Hugging Face Llama/Qwen tensor name, or "" if it is
// not one of the standard names (such tensors keep their own name).
std::string canonical_hf_name(const std::string& hf_name);
// The inverse: the Hugging Face name of a canonical tensor name, or "".
std::string hf_tensor_name(const std::string& canonical);

}  // namespace pocket
