#include "quant/source_grid.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "core/pq_format.h"
#include "kernels/gguf_layout.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket::quant {

namespace {

constexpr int kGroup = 32;

float half_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// One block of 32 of the source as PQ wants it: value = s * q[i] + m
// (m = 0 for PQ8 targets), in float before the fp16 rounding of s and m
// (exact for every type but Q4_K: -8d and -16d are fp16 values when finite).
struct Group32 {
  float s = 0, m = 0;
  int q[kGroup];
};

int64_t source_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::Q4_K: return 144;  // per 256 columns
    case DType::Q5_K: return 176;
    default: return 0;
  }
}

// Group g (32 columns) of a row starting at `row` (the 32-column types; Q4_K
// goes through repack_q4k_row).
void decode_group(DType t, const uint8_t* row, int64_t g, Group32& out) {
  const uint8_t* b = row + g * source_block_bytes(t);
  const float d = half_at(b);
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
      out.s = d;
      out.m = t == DType::Q4_0 ? -8.0f * d : half_at(b + 2);
      for (int l = 0; l < 16; ++l) {
        const uint8_t byte = b[(t == DType::Q4_0 ? 2 : 4) + l];
        out.q[l] = byte & 0x0f;
        out.q[l + 16] = byte >> 4;
      }
      break;
    case DType::Q5_0:
    case DType::Q5_1: {  // d, [m,] 4 bytes of fifth bits, 16 bytes of nibbles
      const int at = t == DType::Q5_0 ? 2 : 4;
      const uint32_t qh = kernels::gguf_u32(b + at);
      out.s = d;
      out.m = t == DType::Q5_0 ? -16.0f * d : half_at(b + 2);
      for (int l = 0; l < 16; ++l) {
        out.q[l] = (b[at + 4 + l] & 0x0f) | ((qh >> l) & 1) << 4;
        out.q[l + 16] = (b[at + 4 + l] >> 4) | ((qh >> (l + 16)) & 1) << 4;
      }
      break;
    }
    case DType::Q8_0:
      out.s = d;
      out.m = 0;
      for (int l = 0; l < kGroup; ++l) out.q[l] = static_cast<int8_t>(b[2 + l]);
      break;
    default:
      break;
  }
}

// An fp16 value that is not inf or NaN (exponent field not all ones).
bool finite_half(uint16_t bits) { return (bits & 0x7c00) != 0x7c00; }

// fp16 rounding error bound of v: half an ulp.
double half_rounding(double v) { return std::max(std::fabs(v) * 0x1p-11, 0x1p-25); }

}  // namespace

DType source_grid_type(DType t) {
  if (t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q4_K) return DType::PQ4;
  return t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K ? DType::PQ5 : DType::PQ8;
}

namespace {

// Where row `rr` (0..15) of a tile puts group g's header and codes; null
// `tile` = check only.
struct RowSink {
  uint8_t* tile = nullptr;  // the first group block of the row's tile
  int64_t gbytes = 0, hdr = 0;
  int rr = 0;
  DType to = DType::PQ4;
};

// PQ4 codes, chunk c, byte 4 rr + k: element 8c + k low nibble, 8c + 4 + k
// high; PQ5 adds their fifth bits at bits 2c and 2c + 1 of plane byte 4 rr + k.
void put_pq4_codes(uint8_t* data, int rr, const int* q, bool pq5) {
  uint8_t plane[4] = {0, 0, 0, 0};
  for (int c = 0; c < kGroup / 8; ++c)
    for (int k = 0; k < 4; ++k) {
      const int lo = q[8 * c + k], hi = q[8 * c + 4 + k];
      data[c * 64 + 4 * rr + k] = static_cast<uint8_t>((lo & 0x0f) | (hi & 0x0f) << 4);
      plane[k] |= static_cast<uint8_t>((lo >> 4 & 1) << (2 * c) | (hi >> 4 & 1) << (2 * c + 1));
    }
  if (pq5) std::memcpy(data + pq::kPlaneOffset + 4 * rr, plane, 4);
}

// Writes one group's fp16 s (and m for PQ4) into the sink; false when either
// is not finite in fp16 (a NaN, inf or overflowing float converts to inf/NaN).
bool put_header(const RowSink& out, int64_t g, float s, float m) {
  const uint16_t s_bits = f32_to_f16(s), m_bits = f32_to_f16(m);
  if (!finite_half(s_bits) || !finite_half(m_bits)) return false;
  if (!out.tile) return true;
  uint8_t* blk = out.tile + g * out.gbytes;
  std::memcpy(blk + 2 * out.rr, &s_bits, 2);  // little-endian hosts only, as the rest of Pocket
  if (out.to != DType::PQ8) std::memcpy(blk + 32 + 2 * out.rr, &m_bits, 2);
  return true;
}

// Q4_K (Q5_K) straight from its super-blocks: the packed scales and mins
// are unpacked once per 256 columns and the nibbles move without an
// intermediate array (the load-time repack of a 0.3B model's matrices).
// Q5_K adds 32 bytes of fifth bits before the nibbles: bit j of byte l is
// that of element l of sub-block j, which PQ5 keeps in its plane.
bool repack_kquant_row(const uint8_t* row, int64_t groups, const RowSink& out, bool five) {
  const int block_bytes = five ? 176 : 144, qs_at = five ? 48 : 16;
  for (int64_t sb = 0; sb < groups / 8; ++sb) {
    const uint8_t* b = row + sb * block_bytes;
    uint64_t scales, mins;
    kernels::kquant_scales_mins(b + 4, scales, mins);
    const float d = half_at(b), dmin = half_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      const int64_t g = sb * 8 + j;
      const float s = d * static_cast<float>(scales >> (8 * j) & 0xff);  // exact: 11 + 6 significant bits
      const float m = -(dmin * static_cast<float>(mins >> (8 * j) & 0xff));
      if (!put_header(out, g, s, m)) return false;
      if (!out.tile) continue;
      const uint8_t* qs = b + qs_at + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      uint8_t* data = out.tile + g * out.gbytes + out.hdr + 4 * out.rr;
      for (int c = 0; c < kGroup / 8; ++c)
        for (int k = 0; k < 4; ++k)
          data[c * 64 + k] =
              static_cast<uint8_t>((qs[8 * c + k] >> shift & 0x0f) | (qs[8 * c + 4 + k] >> shift & 0x0f) << 4);
      if (!five) continue;
      const uint8_t* qh = b + 16;  // bit j of qh[l]: element l of sub-block j
      for (int k = 0; k < 4; ++k) {
        uint8_t plane = 0;
        for (int c = 0; c < kGroup / 8; ++c)
          plane |= static_cast<uint8_t>((qh[8 * c + k] >> j & 1) << (2 * c) | (qh[8 * c + 4 + k] >> j & 1) << (2 * c + 1));
        data[pq::kPlaneOffset + k] = plane;
      }
    }
  }
  return true;
}

// Whether any of the 32 bytes at p is 0x80 (a zero byte of p ^ 0x80...).
bool has_minus_128(const uint8_t* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint64_t any = 0;
  for (int i = 0; i < 4; ++i) {
    uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    v ^= kHigh;
    any |= (v - kOnes) & ~v & kHigh;
  }
  return any != 0;
}

// Q8_0 moves its fp16 scale's bits and its codes four bytes at a time (a
// 178 MB output head at load). PQ8 codes are -127..127 (the AVX2 and NEON
// kernels take |code|): a block with -128 has no PQ8 form.
// The fp16 scale bits of the Q8_0 block at b, when the block has a PQ8 form.
bool q8_0_scale(const uint8_t* b, uint16_t& d_bits) {
  std::memcpy(&d_bits, b, 2);
  return finite_half(d_bits) && !has_minus_128(b + 2);
}

bool repack_q8_0_row(const uint8_t* row, int64_t groups, const RowSink& out) {
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* b = row + g * 34;
    uint16_t d_bits;
    if (!q8_0_scale(b, d_bits)) return false;
    if (!out.tile) continue;
    uint8_t* blk = out.tile + g * out.gbytes;
    std::memcpy(blk + 2 * out.rr, &d_bits, 2);
    for (int c = 0; c < kGroup / 4; ++c) std::memcpy(blk + out.hdr + c * 64 + 4 * out.rr, b + 2 + 4 * c, 4);
  }
  return true;
}

// A whole 16-row tile of Q8_0 at once (rows `row_bytes` apart): each 64-byte
// code chunk is written in one sweep over the tile's rows, which sit in L1.
bool repack_q8_0_tile(const uint8_t* src, int64_t row_bytes, int64_t groups, uint8_t* tile) {
  const int64_t gbytes = pq::group_block_bytes(DType::PQ8, kGroup), hdr = pq::header_bytes(DType::PQ8);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* blk = tile + g * gbytes;
    for (int r = 0; r < pq::kTileRows; ++r) {
      uint16_t d_bits;
      if (!q8_0_scale(src + r * row_bytes + g * 34, d_bits)) return false;
      std::memcpy(blk + 2 * r, &d_bits, 2);
    }
    for (int c = 0; c < kGroup / 4; ++c)
      for (int r = 0; r < pq::kTileRows; ++r) std::memcpy(blk + hdr + c * 64 + 4 * r, src + r * row_bytes + g * 34 + 2 + 4 * c, 4);
  }
  return true;
}

bool repack_row(DType t, const uint8_t* row, int64_t groups, const RowSink& out) {
  if (t == DType::Q4_K || t == DType::Q5_K) return repack_kquant_row(row, groups, out, t == DType::Q5_K);
  if (t == DType::Q8_0) return repack_q8_0_row(row, groups, out);
  Group32 grp;
  for (int64_t g = 0; g < groups; ++g) {
    decode_group(t, row, g, grp);
    if (!put_header(out, g, grp.s, grp.m)) return false;
    if (!out.tile) continue;
    uint8_t* data = out.tile + g * out.gbytes + out.hdr;
    if (out.to != DType::PQ8) {
      put_pq4_codes(data, out.rr, grp.q, out.to == DType::PQ5);
    } else {  // PQ8 chunk c, bytes 4 rr..4 rr + 3: elements 4c..4c + 3
      int8_t q8[kGroup];
      for (int k = 0; k < kGroup; ++k) q8[k] = static_cast<int8_t>(grp.q[k]);
      for (int c = 0; c < kGroup / 4; ++c) std::memcpy(data + c * 64 + 4 * out.rr, q8 + 4 * c, 4);
    }
  }
  return true;
}

// Bytes per row and per block of `w`, or 0 when it has no block-for-block PQ form.
int64_t repackable_row_bytes(const TensorView& w) {
  const int64_t bb = source_block_bytes(w.type);
  const int64_t per_block = w.type == DType::Q4_K || w.type == DType::Q5_K ? 256 : kGroup;
  if (bb == 0 || w.shape.size() != 2 || w.cols() % per_block != 0) return 0;
  const int64_t row_bytes = w.cols() / per_block * bb;
  if (w.nbytes < static_cast<uint64_t>(w.rows() * row_bytes)) return 0;
  return row_bytes;
}

}  // namespace

bool can_repack_to_pq(const TensorView& w) {
  const int64_t row_bytes = repackable_row_bytes(w);
  if (row_bytes == 0) return false;
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows(); ++r)
    if (!repack_row(w.type, src + r * row_bytes, w.cols() / kGroup, RowSink{})) return false;
  return true;
}

int64_t repacked_bytes(const TensorView& w, int64_t n) {
  if (repackable_row_bytes(w) == 0) return 0;
  const DType to = source_grid_type(w.type);
  return pq::padded_rows(n) / pq::kTileRows * (w.cols() / kGroup) * pq::group_block_bytes(to, kGroup);
}

bool try_repack_rows_into(const TensorView& w, int64_t row0, int64_t n, uint8_t* out) {
  if (row0 % pq::kTileRows != 0 || n <= 0 || row0 + n > w.rows())
    fail("repack_rows_to_pq: rows ", row0, "..", row0 + n - 1, " are not whole tiles of '", w.name, "'");
  const int64_t row_bytes = repackable_row_bytes(w);
  if (row_bytes == 0) return false;
  const DType to = source_grid_type(w.type);
  const int64_t groups = w.cols() / kGroup;
  const int64_t gbytes = pq::group_block_bytes(to, kGroup), hdr = pq::header_bytes(to);
  const int64_t tile = groups * gbytes;
  // Rows of a partial last tile leave their bytes unwritten: zero that tile first.
  if (n % pq::kTileRows != 0) std::memset(out + n / pq::kTileRows * tile, 0, static_cast<size_t>(tile));
  const auto* src = static_cast<const uint8_t*>(w.data);
  int64_t i = 0;
  if (w.type == DType::Q8_0)
    for (; i + pq::kTileRows <= n; i += pq::kTileRows)
      if (!repack_q8_0_tile(src + (row0 + i) * row_bytes, row_bytes, groups, out + i / pq::kTileRows * tile)) return false;
  for (; i < n; ++i) {
    RowSink sink{out + (i / pq::kTileRows) * tile, gbytes, hdr, static_cast<int>(i % pq::kTileRows), to};
    if (!repack_row(w.type, src + (row0 + i) * row_bytes, groups, sink)) return false;
  }
  return true;
}

std::optional<std::vector<uint8_t>> try_repack_rows_to_pq(const TensorView& w, int64_t row0, int64_t n) {
  if (row0 % pq::kTileRows != 0 || n <= 0 || row0 + n > w.rows())
    fail("repack_rows_to_pq: rows ", row0, "..", row0 + n - 1, " are not whole tiles of '", w.name, "'");
  const int64_t bytes = repacked_bytes(w, n);
  if (bytes == 0) return std::nullopt;
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  if (!try_repack_rows_into(w, row0, n, out.data())) return std::nullopt;
  return out;
}

std::vector<uint8_t> repack_rows_to_pq(const TensorView& w, int64_t row0, int64_t n) {
  auto out = try_repack_rows_to_pq(w, row0, n);
  if (!out) fail("'", w.name, "' (", dtype_name(w.type), ") has no block-for-block PQ form: a scale or offset is not finite in fp16");
  return std::move(*out);
}

double pq_grid_error_bound(double s, double m, int qmax) { return qmax * half_rounding(s) + half_rounding(m); }

}  // namespace pocket::quant
