// A non-owning view of a tensor stored in a mapped model file (or in a
// buffer owned by the model). Shapes are row-major, slowest dimension first,
// as in PyTorch: a linear layer's weight is {out_features, in_features}.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace pocket {

struct TensorView {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // slowest first
  const void* data = nullptr;
  uint64_t nbytes = 0;
  int group = 0;  // quantization group for PQ types, else 0

  bool valid() const { return data != nullptr; }
  int64_t rows() const { return shape.size() >= 2 ? shape[0] : 1; }
  int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

// Bytes needed by a tensor of this type and shape (rows x row bytes), with
// overflow checks; `what` names the tensor in errors.
uint64_t tensor_nbytes(DType t, const std::vector<int64_t>& shape, int group, const std::string& what);

}  // namespace pocket
