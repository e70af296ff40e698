// Pocket's own quantized weight formats, PQ4 and PQ8. The file stores
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
// PQ8 group block (16 * (G + 2) bytes):
//    16 x fp16 scale s[r]      value = s[r] * q, q in -127..127 (int8)
//    G/4 chunks of 64 bytes; chunk c covers columns k0 = 4c .. 4c+3 of the
//    group: byte 4r+i holds q[r][k0+i].
//
// Per row this is G/2 + 4 (PQ4) and G + 2 (PQ8) bytes per group, as
// dtype_block_bytes() reports: 5 / 4.5 / 4.25 bits per weight for PQ4 at
// G = 32 / 64 / 128.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace pocket::pq {

constexpr int kTileRows = 16;

inline bool valid_group(int g) { return g == 32 || g == 64 || g == 128; }

// Bytes of one group block of a whole tile.
inline int64_t group_block_bytes(DType t, int g) { return int64_t{kTileRows} * (t == DType::PQ4 ? g / 2 + 4 : g + 2); }
// Bytes of the scale header at the start of a group block.
inline int64_t header_bytes(DType t) { return t == DType::PQ4 ? 64 : 32; }
inline int64_t groups_per_row(int64_t cols, int g) { return (cols + g - 1) / g; }
inline int64_t padded_rows(int64_t rows) { return (rows + kTileRows - 1) / kTileRows * kTileRows; }
inline int64_t tile_bytes(DType t, int64_t cols, int g) { return groups_per_row(cols, g) * group_block_bytes(t, g); }

}  // namespace pocket::pq
