// Tensor element types. GGUF-compatible types keep GGUF's block layouts;
// Pocket's own quantized types (PQ*) are defined by src/quant and laid out
// for the kernels that compute on them. New types are appended so stored
// values never change meaning.
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
  PQ4,   // Pocket int4 (see src/core/pq_format.h)
  PQ8,   // Pocket int8 (see src/core/pq_format.h)
  // More GGUF (llama.cpp) types, read so that real llama.cpp files load; the
  // value of each element is defined by src/kernels/dequant_gguf.cpp.
  Q4_1,  // blocks of 32: fp16 d, fp16 m, 16 bytes of nibbles; q * d + m
  Q5_0,  // blocks of 32: fp16 d, 4 bytes of 5th bits, 16 bytes of nibbles; (q - 16) * d
  Q5_1,  // blocks of 32: fp16 d, fp16 m, 4 bytes of 5th bits, 16 bytes of nibbles; q * d + m
  // K-quants: super-blocks of 256 split into sub-blocks with their own
  // quantized scales (and mins).
  Q2_K,  // 84 bytes: 16 x (4-bit scale, 4-bit min), 2-bit quants, fp16 d, fp16 dmin
  Q3_K,  // 110 bytes: high bits, 2-bit low quants, 16 x 6-bit scales, fp16 d
  Q4_K,  // 144 bytes: fp16 d, fp16 dmin, 8 x (6-bit scale, 6-bit min), 4-bit quants
  Q5_K,  // 176 bytes: as Q4_K plus 32 bytes of 5th bits
  Q6_K,  // 210 bytes: 4-bit low quants, 2-bit high quants, 16 x int8 scales, fp16 d
  Q8_K,  // 292 bytes: f32 d, 256 x int8, 16 x int16 block sums (unused when dequantizing)
  PQ5,   // Pocket 5-bit: PQ4's layout plus a plane of fifth bits (see src/core/pq_format.h)
};

// The last enumerator: tables indexed by type have kLastDType + 1 entries.
inline constexpr DType kLastDType = DType::PQ5;

// Pocket's own tiled types (PQ4, PQ5, PQ8): a per-tensor group size, rows
// stored in whole 16-row tiles (src/core/pq_format.h).
inline constexpr bool is_pq(DType t) { return t == DType::PQ4 || t == DType::PQ5 || t == DType::PQ8; }

// Elements per K-quant super-block.
inline constexpr int kQK_K = 256;

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
