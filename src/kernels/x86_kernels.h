// Matmul kernels for x86, written once against the vector traits of
// x86_vec.h and instantiated in kernels_avx2.cpp / kernels_avx512.cpp; the
// PQ kernels come from tiled_kernels.h, the GGUF block kernels from
// gguf_kernels.h, the float ones from float_kernels.h. Unnamed namespace
// for the same reason as x86_vec.h.
#pragma once
#include <algorithm>

#include "kernels/float_kernels.h"
#include "kernels/gguf_kernels.h"
#include "kernels/table.h"
#include "kernels/tiled_kernels.h"
#include "kernels/x86_vec.h"

namespace pocket::kernels {
namespace {

template <class V>
void install_x86_matmul(KernelTable& t) {
  auto set = [&](DType d, MatmulFn fn, bool int8, int64_t align) { t.matmul[static_cast<int>(d)] = {fn, int8, align}; };
  install_float_matmul<V>(t);
  set(DType::PQ4, matmul_pq<V, 4>, true, pq::kTileRows);
  set(DType::PQ5, matmul_pq<V, 5>, true, pq::kTileRows);
  set(DType::PQ8, matmul_pq<V, 8>, true, pq::kTileRows);
  install_gguf_matmul<X86Blocks<V>>(t);
}

}  // namespace
}  // namespace pocket::kernels
