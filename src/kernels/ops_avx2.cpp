// avx2 kernels (filled in below the table installer as they are written).
#include "kernels/table.h"

namespace pocket::kernels {

void install_avx2(KernelTable& t) {}

}  // namespace pocket::kernels
