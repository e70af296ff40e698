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

// The llama.cpp GGUF types beyond Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, Q2_K..Q8_K),
// defined in dequant_gguf.cpp. `row` holds cols / block-size whole blocks.
void dequant_gguf_row(DType t, const uint8_t* row, int64_t cols, float* out);

}  // namespace pocket::kernels
