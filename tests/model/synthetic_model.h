// Synthetic models for the forward tests: a preset's shapes (model/synthetic.h)
// with every weight, the embedding and the head stored as `type`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "formats/model_file.h"
#include "model/synthetic.h"

namespace pocket::test {

inline std::shared_ptr<const ModelFile> synthetic_model(const std::string& preset, DType type, uint64_t seed) {
  SyntheticSpec spec;
  spec.config = preset_config(preset);
  spec.weight_type = spec.embed_type = spec.head_type = type;
  spec.seed = seed;
  return std::make_shared<ModelFile>(make_synthetic_model(spec));
}

}  // namespace pocket::test
