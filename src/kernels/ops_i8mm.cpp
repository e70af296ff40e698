#include "kernels/table.h"

namespace pocket::kernels {

void install_i8mm(KernelTable& t) {}

}  // namespace pocket::kernels
