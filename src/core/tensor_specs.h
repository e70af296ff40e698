// The tensors a model of a given configuration has: canonical (GGUF) names
// and shapes, in file order. One list for the synthetic-model builders, the
// file writers and the load-time shape checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pocket {

struct TensorSpec {
  std::string name;
  int64_t rows, cols;
  bool vector = false;  // a 1-D tensor of cols values (norm weights, biases); rows is 1

  std::vector<int64_t> shape() const { return vector ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols}; }
};

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& c);

}  // namespace pocket
