// Exact re-layouts of row-major GGUF weights into Pocket's tiled formats
// (core/pq_format.h), so the PQ kernels run them. GGUF Q4_0 (blocks of 32:
// fp16 d, value d * (q - 8), q 0..15) is PQ4 with group 32, scale d and
// offset -8d: both exact in fp16, the codes unchanged, so every value is the
// same bit for bit.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace pocket::quant {

// The PQ4 (group 32) bytes of a 2-D Q4_0 weight, or nothing when some
// block's d is not finite or -8d overflows fp16 (|d| > 8188): then the
// weight stays Q4_0.
std::optional<std::vector<uint8_t>> repack_q4_0_to_pq4(const TensorView& w);

}  // namespace pocket::quant
