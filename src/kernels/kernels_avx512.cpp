// AVX-512 (F/BW/VL/DQ) + VNNI level: 16 rows per zmm, vpdpbusd for int8 dots.
#include "kernels/table.h"
#include "kernels/x86_kernels.h"

namespace pocket::kernels {

void install_avx512_attention(KernelTable& t);  // attention_avx512.cpp
void install_avx512_act_quant(KernelTable& t);  // act_quant_avx512.cpp

void install_avx512(KernelTable& t) {
  install_x86_matmul<Avx512>(t);
  install_avx512_attention(t);
  install_avx512_act_quant(t);
}

}  // namespace pocket::kernels
