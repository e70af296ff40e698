// AVX2 + AVX-VNNI level: the AVX2 level's kernels with the VEX-encoded
// VNNI dots for the int8 matmuls (x86_vec.h's AvxVnni); everything else is
// the AVX2 level's.
#include "kernels/table.h"
#include "kernels/x86_kernels.h"

namespace pocket::kernels {

void install_avxvnni(KernelTable& t) { install_x86_matmul<AvxVnni>(t); }

}  // namespace pocket::kernels
