// Tensor element types. GGUF-compatible types keep GGUF's block layouts;
// Pocket's own quantized types (PQ*) are defined by src/quant and laid out
// for the kernels that compute on them.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace pocket {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  Q8_0,  // GGUF: blocks of 32 = fp16 scale + 32 x int8
  Q4_0,  // GGUF: blocks of 32 = fp16 scale + 16 bytes of nibbles, value = (q - 8) * d
  PQ4,   // Pocket int4 (see src/quant/pq_format.h)
  PQ8,   // Pocket int8 (see src/quant/pq_format.h)
};

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Elements per block for block-quantized types (1 for plain types); for PQ
// types the group size is a per-tensor parameter, so pass it in `group`.
int dtype_block_elems(DType t, int group = 0);
// Bytes of one block (or one element for plain types).
int dtype_block_bytes(DType t, int group = 0);
// Bytes of one row of `n` elements; fails with pocket::Error if n does not
// divide into blocks (for types that need it) or on overflow.
uint64_t dtype_row_bytes(DType t, uint64_t n, int group = 0);

}  // namespace pocket
