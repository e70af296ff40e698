// Pocket's own quantized weight formats, PQ4, PQ5 and PQ8. The file stores
// exactly the layout the kernels compute on; models use it in place.
//
// A weight W[rows, cols] with group size G (32, 64 or 128, per tensor):
//  * Rows are grouped in tiles of 16 (kPqTileRows). The row count is padded
//    up to a multiple of 16; padding rows are stored (all bytes zero) and
//    never read back as outputs.
//  * Each row is split into groups of G columns. The last group of a row may
//    be partial (cols % G != 0): it is stored as a full group whose padding
//    elements hold code 0 and must be ignored by readers. Kernels make them
//    harmless by zero-padding the activations, dequant_row never emits them.
//  * Tiles are stored one after another; inside a tile, groups one after
//    another; each group of a tile is one contiguous "group block":
//
// PQ4 group block (16 * (G/2 + 4) bytes):
//    16 x fp16 scale s[r]      (r = row within the tile)
//    16 x fp16 offset m[r]     value = s[r] * q + m[r], q in 0..15 unsigned
//    G/8 chunks of 64 bytes; chunk c covers columns k0 = 8c .. 8c+7 of the
//    group: byte 4r+i (r < 16, i < 4) holds q[r][k0+i] in its low nibble
//    and q[r][k0+4+i] in its high nibble.
//  The zero point is folded into m = -s * zero, so the inner loop is one
//  AND (or shift) per 64 bytes giving 4 ready-to-dot unsigned bytes per row
//  per lane, and an integer dot with the activations is corrected once per
//  group by m * sum(x). A 32-bit lane holds one row's 4 consecutive columns,
//  so broadcasting 4 activation bytes feeds vpdpbusd / sdot (by element) for
//  16 rows at once, with no horizontal sums; zipping low/high 32-bit lanes
//  of two rows gives the 2x8 operand of smmla.
//
// PQ5 group block (16 * (G/2 + G/8 + 4) bytes): PQ4 with a fifth bit.
//    the PQ4 header (s[r], m[r]; value = s[r] * q + m[r], q in 0..31)
//    G/32 sub-blocks of 320 bytes, one per 32 columns: sub-block j holds
//    PQ4's chunks 4j..4j+3 (256 bytes of low 4 bits, laid out as in PQ4)
//    followed by a 64-byte plane of fifth bits: plane byte i, bit 2c + h
//    is bit 4 of the code whose low 4 bits are in byte i of the sub-block's
//    chunk c (c < 4), low nibble for h = 0, high for h = 1.
//  So a kernel that unpacks bytes i..i+n of a chunk into low and high
//  nibbles reads bytes i..i+n of the plane and moves bit 2c (2c + 1) to bit
//  4: one shift and one mask per vector, at any vector width. Exactly the
//  grid of GGUF Q5_0 (s = d, m = -16 d) and Q5_1 (s = d, m = m): 6 bits per
//  weight at G = 32 (Q5_0: 5.5) instead of PQ8's 8.5.
//
// PQ8 group block (16 * (G + 2) bytes):
//    16 x fp16 scale s[r]      value = s[r] * q, q in -127..127 (int8)
//    G/4 chunks of 64 bytes; chunk c covers columns k0 = 4c .. 4c+3 of the
//    group: byte 4r+i holds q[r][k0+i].
//
// Per row this is G/2 + 4 (PQ4), G/2 + G/8 + 4 (PQ5) and G + 2 (PQ8) bytes
// per group, as dtype_block_bytes() reports: 5 / 4.5 / 4.25 bits per weight
// for PQ4 at G = 32 / 64 / 128, 6 / 5.5 / 5.25 for PQ5.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace pocket::pq {

constexpr int kTileRows = 16;

inline bool valid_group(int g) { return g == 32 || g == 64 || g == 128; }

// Bytes of one group block of a whole tile.
inline int64_t group_block_bytes(DType t, int g) {
  return int64_t{kTileRows} * (t == DType::PQ4 ? g / 2 + 4 : t == DType::PQ5 ? g / 2 + g / 8 + 4 : g + 2);
}
// Bytes of the scale header at the start of a group block.
inline int64_t header_bytes(DType t) { return t == DType::PQ8 ? 32 : 64; }
// Code bits per weight of a PQ type, and the bytes of one 32-column
// sub-block of a group block (after the header) for each.
constexpr int code_bits(DType t) { return t == DType::PQ4 ? 4 : t == DType::PQ5 ? 5 : 8; }
constexpr int sub_block_bytes(int bits) { return bits == 4 ? 256 : bits == 5 ? 320 : 512; }
// Offset of the fifth-bit plane inside a PQ5 sub-block.
constexpr int kPlaneOffset = 256;

// The code (PQ4/PQ5: unsigned, PQ8: signed) of row r (0..15), column k
// (0..G-1) of a group block whose codes start at `data` (after the header):
// the plain reading of the layouts above, for references and conversions.
inline int code_at(DType t, const uint8_t* data, int r, int k) {
  const uint8_t* sub = data + (k / 32) * sub_block_bytes(code_bits(t));
  const int kk = k % 32;
  if (t == DType::PQ8) return static_cast<int8_t>(sub[(kk / 4) * 64 + 4 * r + kk % 4]);
  const int c = kk / 8, h = kk % 8 >= 4 ? 1 : 0, i = 4 * r + kk % 4;
  int q = h ? sub[c * 64 + i] >> 4 : sub[c * 64 + i] & 0x0f;
  if (t == DType::PQ5) q |= (sub[kPlaneOffset + i] >> (2 * c + h) & 1) << 4;
  return q;
}

// Sets that code (PQ4: 0..15, PQ5: 0..31, PQ8: -127..127) in zeroed bytes:
// the writing twin of code_at (bits are OR-ed in).
inline void put_code(DType t, uint8_t* data, int r, int k, int q) {
  uint8_t* sub = data + (k / 32) * sub_block_bytes(code_bits(t));
  const int kk = k % 32;
  if (t == DType::PQ8) {
    sub[(kk / 4) * 64 + 4 * r + kk % 4] = static_cast<uint8_t>(q);
    return;
  }
  const int c = kk / 8, h = kk % 8 >= 4 ? 1 : 0, i = 4 * r + kk % 4;
  sub[c * 64 + i] |= static_cast<uint8_t>((q & 0x0f) << (4 * h));
  if (t == DType::PQ5) sub[kPlaneOffset + i] |= static_cast<uint8_t>((q >> 4 & 1) << (2 * c + h));
}
inline int64_t groups_per_row(int64_t cols, int g) { return (cols + g - 1) / g; }
inline int64_t padded_rows(int64_t rows) { return (rows + kTileRows - 1) / kTileRows * kTileRows; }
// Always inlined for the reason given at ActBlocks::row (kernels/act_quant.h).
[[gnu::always_inline]] inline int64_t tile_bytes(DType t, int64_t cols, int g) {
  return groups_per_row(cols, g) * group_block_bytes(t, g);
}

}  // namespace pocket::pq
