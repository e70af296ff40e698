// The model fuzz_session_state loads states into, and its seeds are saved
// from: a tiny synthetic Qwen3 with sliding-window layers (window 8 on every
// other layer).
#pragma once
#include <memory>

#include "model/model.h"
#include "model/synthetic.h"

namespace pocket::fuzz {

inline std::shared_ptr<Model> state_fuzz_model() {
  SyntheticSpec spec;
  spec.config = preset_config("tiny-qwen3");
  spec.config.sliding_window = 8;
  spec.config.swa_pattern = 2;
  return std::make_shared<Model>(std::make_shared<ModelFile>(make_synthetic_model(spec)));
}
inline constexpr int kStateFuzzContext = 64;

}  // namespace pocket::fuzz
