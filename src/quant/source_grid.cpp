#include "quant/source_grid.h"

#include <cmath>
#include <cstring>

#include "core/pq_format.h"
#include "kernels/gguf_layout.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket::quant {

namespace {

constexpr int kGroup = 32;

float half_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// One block of 32 of the source as PQ wants it: value = s * q[i] + m
// (m = 0 for PQ8 targets), in float before the fp16 rounding of s and m.
struct Group32 {
  float s = 0, m = 0;
  int q[kGroup];
};

int64_t source_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q8_0: return 34;
    case DType::Q4_K: return 144;  // per 256 columns
    default: return 0;
  }
}

// Group g (32 columns) of a row starting at `row`.
void decode_group(DType t, const uint8_t* row, int64_t g, Group32& out) {
  if (t == DType::Q4_K) {
    const uint8_t* b = row + (g / 8) * 144;
    const int j = static_cast<int>(g % 8);  // sub-block within the super-block
    uint64_t scales, mins;
    kernels::kquant_scales_mins(b + 4, scales, mins);
    const float sc = static_cast<float>(scales >> (8 * j) & 0xff), mn = static_cast<float>(mins >> (8 * j) & 0xff);
    out.s = half_at(b) * sc;  // exact in float: 11 + 6 significant bits
    out.m = -(half_at(b + 2) * mn);
    const uint8_t* qs = b + 16 + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < kGroup; ++l) out.q[l] = (qs[l] >> shift) & 0x0f;
    return;
  }
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
    case DType::Q5_0: {
      const uint32_t qh = kernels::gguf_u32(b + 2);
      out.s = d;
      out.m = 0;
      for (int l = 0; l < 16; ++l) {
        out.q[l] = ((b[6 + l] & 0x0f) | ((qh >> l) & 1) << 4) - 16;
        out.q[l + 16] = ((b[6 + l] >> 4) | ((qh >> (l + 16)) & 1) << 4) - 16;
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

bool fits_half(float v) { return std::isfinite(v) && std::isfinite(f16_to_f32(f32_to_f16(v))); }

// fp16 rounding error bound of v: half an ulp.
double half_rounding(double v) { return std::max(std::fabs(v) * 0x1p-11, 0x1p-25); }

}  // namespace

DType source_grid_type(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q4_K ? DType::PQ4 : DType::PQ8;
}

bool can_repack_to_pq(const TensorView& w) {
  const int64_t bb = source_block_bytes(w.type);
  const int64_t per_block = w.type == DType::Q4_K ? 256 : kGroup;
  if (bb == 0 || w.shape.size() != 2 || w.cols() % per_block != 0) return false;
  const int64_t rows = w.rows(), groups = w.cols() / kGroup;
  const int64_t row_bytes = w.cols() / per_block * bb;
  if (w.nbytes < static_cast<uint64_t>(rows * row_bytes)) return false;
  const auto* src = static_cast<const uint8_t*>(w.data);
  Group32 grp;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      decode_group(w.type, src + r * row_bytes, g, grp);
      if (!fits_half(grp.s) || !fits_half(grp.m)) return false;
    }
  return true;
}

std::vector<uint8_t> repack_rows_to_pq(const TensorView& w, int64_t row0, int64_t n) {
  if (row0 % pq::kTileRows != 0 || n <= 0 || row0 + n > w.rows())
    fail("repack_rows_to_pq: rows ", row0, "..", row0 + n - 1, " are not whole tiles of '", w.name, "'");
  const DType to = source_grid_type(w.type);
  const int64_t per_block = w.type == DType::Q4_K ? 256 : kGroup;
  const int64_t groups = w.cols() / kGroup, row_bytes = w.cols() / per_block * source_block_bytes(w.type);
  const int64_t gbytes = pq::group_block_bytes(to, kGroup), hdr = pq::header_bytes(to);
  const int64_t tiles = pq::padded_rows(n) / pq::kTileRows;
  std::vector<uint8_t> out(static_cast<size_t>(tiles * groups * gbytes), 0);
  const auto* src = static_cast<const uint8_t*>(w.data);
  Group32 grp;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t tile = i / pq::kTileRows, rr = i % pq::kTileRows;
    for (int64_t g = 0; g < groups; ++g) {
      decode_group(w.type, src + (row0 + i) * row_bytes, g, grp);
      uint8_t* blk = out.data() + (tile * groups + g) * gbytes;
      const uint16_t s_bits = f32_to_f16(grp.s), m_bits = f32_to_f16(grp.m);
      std::memcpy(blk + 2 * rr, &s_bits, 2);  // little-endian hosts only, as the rest of Pocket
      uint8_t* data = blk + hdr;
      if (to == DType::PQ4) {
        std::memcpy(blk + 32 + 2 * rr, &m_bits, 2);
        // chunk c, byte 4 rr + i: element 8c + i low nibble, 8c + 4 + i high.
        for (int c = 0; c < kGroup / 8; ++c)
          for (int k = 0; k < 4; ++k)
            data[c * 64 + 4 * rr + k] = static_cast<uint8_t>(grp.q[8 * c + k] | grp.q[8 * c + 4 + k] << 4);
      } else {
        for (int k = 0; k < kGroup; ++k) data[(k / 4) * 64 + 4 * rr + k % 4] = static_cast<uint8_t>(grp.q[k]);
      }
    }
  }
  return out;
}

double pq_grid_error_bound(double s, double m) { return 15 * half_rounding(s) + half_rounding(m); }

}  // namespace pocket::quant
