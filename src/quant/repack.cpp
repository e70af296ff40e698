#include "quant/repack.h"

#include <cmath>
#include <cstring>

#include "core/pq_format.h"
#include "util/half.h"

namespace pocket::quant {

namespace {

constexpr int kGroup = 32;

// The PQ4 group-32 output of a weight and where row r's group g goes.
struct Pq4Out {
  int64_t groups, gbytes;
  std::vector<uint8_t> bytes;
  Pq4Out(int64_t rows, int64_t cols)
      : groups(cols / kGroup), gbytes(pq::group_block_bytes(DType::PQ4, kGroup)),
        bytes(static_cast<size_t>(pq::padded_rows(rows) / pq::kTileRows * groups * gbytes), 0) {}  // padding rows stay zero

  // Row r, group g: fp16 scale and offset bits, and code(j) for j < 32.
  template <class Code>
  void put(int64_t r, int64_t g, uint16_t s_bits, uint16_t m_bits, Code code) {
    const int64_t tile = r / pq::kTileRows, rr = r % pq::kTileRows;
    uint8_t* dst = bytes.data() + (tile * groups + g) * gbytes;
    std::memcpy(dst + 2 * rr, &s_bits, 2);  // little-endian hosts only, as the rest of Pocket
    std::memcpy(dst + 32 + 2 * rr, &m_bits, 2);
    // PQ4 chunk c, byte 4 rr + i: element 8c + i low nibble, 8c + 4 + i high.
    for (int c = 0; c < kGroup / 8; ++c)
      for (int i = 0; i < 4; ++i)
        dst[64 + c * 64 + 4 * rr + i] = static_cast<uint8_t>(code(8 * c + i) | code(8 * c + 4 + i) << 4);
  }
};

// fp16 bits of x when round-to-nearest keeps it within 2^-11 relative: x is
// zero or in fp16's normal range.
std::optional<uint16_t> f16_within_bound(float x) {
  constexpr float kMinNormal = 6.103515625e-05f, kMax = 65504.0f;
  const float a = std::fabs(x);
  if (!(a == 0.0f || (a >= kMinNormal && a <= kMax))) return std::nullopt;
  return f32_to_f16(x);
}

}  // namespace

std::optional<std::vector<uint8_t>> repack_q4_0_to_pq4(const TensorView& w) {
  constexpr int kBlockBytes = 18;
  const int64_t rows = w.rows(), cols = w.cols();
  if (w.type != DType::Q4_0 || w.shape.size() != 2 || cols % kGroup != 0) return std::nullopt;
  Pq4Out out(rows, cols);
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < out.groups; ++g) {
      const uint8_t* blk = src + (r * out.groups + g) * kBlockBytes;
      const uint16_t d_bits = static_cast<uint16_t>(blk[0] | blk[1] << 8);
      const float d = f16_to_f32(d_bits);
      const uint16_t m_bits = f32_to_f16(-8.0f * d);
      if (!std::isfinite(d) || f16_to_f32(m_bits) != -8.0f * d) return std::nullopt;
      // Q4_0 element j: low nibble of byte j (j < 16), high nibble of byte j - 16.
      out.put(r, g, d_bits, m_bits, [&](int j) { return j < 16 ? blk[2 + j] & 0x0f : blk[2 + j - 16] >> 4; });
    }
  return std::move(out.bytes);
}

std::optional<std::vector<uint8_t>> repack_q4_k_to_pq4(const TensorView& w) {
  constexpr int kSuper = 256, kBlockBytes = 144;
  const int64_t rows = w.rows(), cols = w.cols();
  if (w.type != DType::Q4_K || w.shape.size() != 2 || cols % kSuper != 0) return std::nullopt;
  Pq4Out out(rows, cols);
  const int64_t supers = cols / kSuper;
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < supers; ++sb) {
      const uint8_t* blk = src + (r * supers + sb) * kBlockBytes;
      const float d = f16_to_f32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
      const float dmin = f16_to_f32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
      const uint8_t* sm = blk + 4;  // eight 6-bit (scale, min) pairs in 12 bytes
      const uint8_t* qs = blk + 16;
      for (int j = 0; j < 8; ++j) {
        const int sc = j < 4 ? sm[j] & 63 : (sm[j + 4] & 0x0f) | (sm[j - 4] >> 6) << 4;
        const int m = j < 4 ? sm[j + 4] & 63 : (sm[j + 4] >> 4) | (sm[j] >> 6) << 4;
        const auto s_bits = f16_within_bound(d * static_cast<float>(sc));
        const auto m_bits = f16_within_bound(-dmin * static_cast<float>(m));
        if (!s_bits || !m_bits) return std::nullopt;
        // Sub-block j: 32 bytes qs[32 (j / 2) ..], low nibbles for even j, high for odd.
        const uint8_t* q = qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        out.put(r, sb * 8 + j, *s_bits, *m_bits, [&](int k) { return (q[k] >> shift) & 0x0f; });
      }
    }
  return std::move(out.bytes);
}

}  // namespace pocket::quant
