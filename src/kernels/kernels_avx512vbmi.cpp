// AVX-512 VBMI level: the AVX-512 table with the PQ4 / PQ5 tile kernels
// built on Avx512Vbmi's byte-permute unpacking (x86_vec.h); installed over
// install_avx512's table only where the CPU reports AVX512_VBMI.
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"
#include "kernels/x86_vec.h"

namespace pocket::kernels {

void install_avx512vbmi(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq<Avx512Vbmi, 4>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ5)] = {matmul_pq<Avx512Vbmi, 5>, true, pq::kTileRows};
}

}  // namespace pocket::kernels
