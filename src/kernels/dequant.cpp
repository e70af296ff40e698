#include "kernels/dequant.h"

#include "kernels/kernels.h"
#include "core/pq_format.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket::kernels {

namespace {

void dequant_q8_0(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* blk = row + b * 34;
    float d = f16_to_f32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
  }
}

void dequant_q4_0(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* blk = row + b * 18;
    float d = f16_to_f32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = d * static_cast<float>((blk[2 + j] & 0x0f) - 8);
      out[b * 32 + j + 16] = d * static_cast<float>((blk[2 + j] >> 4) - 8);
    }
  }
}

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

void dequant_pq(const TensorView& w, int64_t row, float* out) {
  const int g = w.group;
  const int64_t cols = w.cols();
  const int64_t r = row % pq::kTileRows;
  const auto* tile = static_cast<const uint8_t*>(w.data) + (row / pq::kTileRows) * pq::tile_bytes(w.type, cols, g);
  const int64_t gbytes = pq::group_block_bytes(w.type, g);
  for (int64_t gi = 0; gi < pq::groups_per_row(cols, g); ++gi) {
    const uint8_t* blk = tile + gi * gbytes;
    const float s = f16_to_f32(load_u16(blk + 2 * r));
    const uint8_t* data = blk + pq::header_bytes(w.type);
    const float m = w.type == DType::PQ8 ? 0.0f : f16_to_f32(load_u16(blk + 32 + 2 * r));
    for (int k = 0; k < g && gi * g + k < cols; ++k) {
      const float q = static_cast<float>(pq::code_at(w.type, data, static_cast<int>(r), k));
      out[gi * g + k] = w.type == DType::PQ8 ? s * q : s * q + m;
    }
  }
}

}  // namespace

void check_weight(const TensorView& w) {
  if (w.data == nullptr) fail("weight '", w.name, "': no data");
  if (w.shape.size() != 2) fail("weight '", w.name, "': expected 2 dimensions, got ", w.shape.size());
  if (is_pq(w.type)) {
    if (!pq::valid_group(w.group)) fail("weight '", w.name, "': group size ", w.group, " is not 32, 64 or 128");
  }
  uint64_t need = tensor_nbytes(w.type, w.shape, w.group, w.name);
  if (w.nbytes < need) fail("weight '", w.name, "': ", w.nbytes, " bytes, type and shape need ", need);
}

void dequant_row_unchecked(const TensorView& w, int64_t row, float* out) {
  const int64_t cols = w.cols();
  const auto* base = static_cast<const uint8_t*>(w.data);
  switch (w.type) {
    case DType::F32: {
      const auto* p = reinterpret_cast<const float*>(base) + row * cols;
      for (int64_t k = 0; k < cols; ++k) out[k] = p[k];
      return;
    }
    case DType::F16:
    case DType::BF16: {
      const auto* p = reinterpret_cast<const uint16_t*>(base) + row * cols;
      if (w.type == DType::F16) {
        for (int64_t k = 0; k < cols; ++k) out[k] = f16_to_f32(p[k]);
      } else {
        for (int64_t k = 0; k < cols; ++k) out[k] = bf16_to_f32(p[k]);
      }
      return;
    }
    case DType::Q8_0:
      return dequant_q8_0(base + row * (cols / 32) * 34, cols, out);
    case DType::Q4_0:
      return dequant_q4_0(base + row * (cols / 32) * 18, cols, out);
    case DType::PQ4:
    case DType::PQ5:
    case DType::PQ8:
      return dequant_pq(w, row, out);
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K: {
      // Rows are whole blocks back to back (check_weight validated the size).
      const int64_t row_bytes = cols / dtype_block_elems(w.type) * dtype_block_bytes(w.type);
      return dequant_gguf_row(w.type, base + row * row_bytes, cols, out);
    }
  }
}

void dequant_row(const TensorView& w, int64_t row, float* out) {
  check_weight(w);
  if (row < 0 || row >= w.rows()) fail("weight '", w.name, "': row ", row, " out of range [0, ", w.rows(), ")");
  dequant_row_unchecked(w, row, out);
}

}  // namespace pocket::kernels
