// AArch64 dotprod level: PQ4/PQ8 matmul with sdot on 16-row tiles. Q4_0/Q8_0
// and float weights use the scalar reference at this level (not yet ported).
#include "kernels/arm_vec.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {

void install_dotprod(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq<NeonDot, true>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq<NeonDot, false>, true, pq::kTileRows};
}

}  // namespace pocket::kernels
