#include "quant/repack.h"

#include <cmath>
#include <cstring>

#include "core/pq_format.h"
#include "util/half.h"

namespace pocket::quant {

std::optional<std::vector<uint8_t>> repack_q4_0_to_pq4(const TensorView& w) {
  constexpr int kGroup = 32, kBlockBytes = 18;
  const int64_t rows = w.rows(), cols = w.cols();
  if (w.type != DType::Q4_0 || w.shape.size() != 2 || cols % kGroup != 0) return std::nullopt;
  const int64_t groups = cols / kGroup;
  const int64_t gbytes = pq::group_block_bytes(DType::PQ4, kGroup);  // 16 x (2 + 2 + 16)
  const int64_t tiles = pq::padded_rows(rows) / pq::kTileRows;
  std::vector<uint8_t> out(static_cast<size_t>(tiles * groups * gbytes), 0);  // padding rows stay zero
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile = r / pq::kTileRows, rr = r % pq::kTileRows;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* blk = src + (r * groups + g) * kBlockBytes;
      uint8_t* dst = out.data() + (tile * groups + g) * gbytes;
      const uint16_t d_bits = static_cast<uint16_t>(blk[0] | blk[1] << 8);
      const float d = f16_to_f32(d_bits);
      const uint16_t m_bits = f32_to_f16(-8.0f * d);
      if (!std::isfinite(d) || f16_to_f32(m_bits) != -8.0f * d) return std::nullopt;
      std::memcpy(dst + 2 * rr, &d_bits, 2);  // little-endian hosts only, as the rest of Pocket
      std::memcpy(dst + 32 + 2 * rr, &m_bits, 2);
      // Q4_0 element j: low nibble of byte j (j < 16), high nibble of byte
      // j - 16. PQ4 chunk c, byte 4 rr + i: element 8c + i low, 8c + 4 + i high.
      auto code = [&](int j) { return j < 16 ? blk[2 + j] & 0x0f : blk[2 + j - 16] >> 4; };
      for (int c = 0; c < kGroup / 8; ++c)
        for (int i = 0; i < 4; ++i)
          dst[64 + c * 64 + 4 * rr + i] = static_cast<uint8_t>(code(8 * c + i) | code(8 * c + 4 + i) << 4);
    }
  }
  return out;
}

}  // namespace pocket::quant
