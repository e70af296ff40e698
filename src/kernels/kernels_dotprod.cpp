// AArch64 dotprod level: PQ4/PQ8 matmul with sdot on 16-row tiles, the GGUF
// block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) with sdot per block, and the
// q8 cache's attention scores (attention_dotprod.cpp). Float weights keep
// the baseline NEON kernels.
#include "kernels/arm_vec.h"
#include "kernels/gguf_kernels.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {

void install_dotprod_attention(KernelTable& t);  // attention_dotprod.cpp

void install_dotprod(KernelTable& t) {
  install_dotprod_attention(t);
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq<NeonDot, true>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq<NeonDot, false>, true, pq::kTileRows};
  install_gguf_matmul<ArmDotBlocks>(t);
}

}  // namespace pocket::kernels
