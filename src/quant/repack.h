// Re-layouts of row-major GGUF weights into Pocket's tiled formats
// (core/pq_format.h), so the PQ kernels run them (several times the
// row-major kernels' prefill speed). The 4-bit codes are kept as they are;
// only the per-group scale and offset change form.
//  * GGUF Q4_0 (blocks of 32: fp16 d, value d * (q - 8), q 0..15) is PQ4
//    with group 32, scale d and offset -8d: both exact in fp16, so every
//    value is the same bit for bit.
//  * GGUF Q4_K (super-blocks of 256: fp16 d and dmin, eight 6-bit (sc, m)
//    pairs, value d*sc*q - dmin*m per sub-block of 32) is PQ4 with group 32,
//    scale d*sc and offset -dmin*m rounded to fp16: each carries a relative
//    error of at most 2^-11 (round to nearest, normal range), so a value
//    moves by at most 2^-11 (|d*sc*q| + |dmin*m|), about 1/1000 of a
//    quantization step; fp16 cannot hold d*sc exactly in general (it needs up
//    to 17 significant bits).
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

// The PQ4 (group 32) bytes of a 2-D Q4_K weight, or nothing when some
// sub-block's scale or offset is not finite, overflows fp16, or falls in
// fp16's subnormal range (where the 2^-11 bound would not hold): then the
// weight stays Q4_K.
std::optional<std::vector<uint8_t>> repack_q4_k_to_pq4(const TensorView& w);

}  // namespace pocket::quant
