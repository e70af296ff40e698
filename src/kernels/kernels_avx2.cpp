// AVX2 + FMA + F16C level: 16 rows per ymm pair, maddubs for int8 dots.
#include "kernels/table.h"
#include "kernels/x86_kernels.h"

namespace pocket::kernels {

void install_x86_ops(KernelTable& t);  // ops_avx2.cpp
void install_avx2_act_quant(KernelTable& t);  // act_quant_avx2.cpp

void install_avx2(KernelTable& t) {
  install_x86_matmul<Avx2>(t);
  install_x86_ops(t);
  install_avx2_act_quant(t);
}

}  // namespace pocket::kernels
