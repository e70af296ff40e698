// AArch64 dotprod level: PQ4/PQ5/PQ8 matmul with sdot on 16-row tiles (decode:
// the one-row-per-lane traits of tiled_kernels.h; prefill: the register-
// blocked GEMM of arm_pq_gemm.h), the GGUF
// block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) with sdot per block, and the
// q8 cache's attention scores (attention_dotprod.cpp). Float weights keep
// the baseline NEON kernels.
#include "kernels/arm_pq_gemm.h"
#include "kernels/arm_vec.h"
#include "kernels/gguf_kernels.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {

void install_dotprod_attention(KernelTable& t);  // attention_dotprod.cpp

namespace {

template <int Q>
void matmul_pq_dot(const MatmulJob& job, int64_t r0, int64_t r1) {
  if (job.n == 1) return matmul_pq<NeonDot, Q>(job, r0, r1);
  matmul_pq_gemm<Q>(job, r0, r1);
}

}  // namespace

void install_dotprod(KernelTable& t) {
  install_dotprod_attention(t);
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq_dot<4>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ5)] = {matmul_pq_dot<5>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq_dot<8>, true, pq::kTileRows};
  install_gguf_matmul<ArmDotBlocks>(t);
}

}  // namespace pocket::kernels
