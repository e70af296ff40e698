#include "kernels/table.h"

namespace pocket::kernels {

void install_neon(KernelTable& t) {}

}  // namespace pocket::kernels
