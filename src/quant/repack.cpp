#include "quant/repack.h"

#include "quant/source_grid.h"

namespace pocket::quant {

std::optional<std::vector<uint8_t>> repack_q4_0_to_pq4(const TensorView& w) {
  if (w.type != DType::Q4_0 || !can_repack_to_pq(w)) return std::nullopt;
  return repack_rows_to_pq(w, 0, w.rows());
}

}  // namespace pocket::quant
