// avx512 kernels (filled in below the table installer as they are written).
#include "kernels/table.h"

namespace pocket::kernels {

void install_avx512(KernelTable& t) {}

}  // namespace pocket::kernels
