// Scalar dequantization of one weight row: the definition of every weight
// format's values, shared by dequant_row and the scalar matmul reference.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace pocket::kernels {

// Checks that `w` is a 2-D weight whose byte size matches its type, shape
// and group; fails with pocket::Error naming the tensor otherwise.
void check_weight(const TensorView& w);

// Writes cols() floats of row `row` (no checks; callers validated `w`).
void dequant_row_unchecked(const TensorView& w, int64_t row, float* out);

}  // namespace pocket::kernels
