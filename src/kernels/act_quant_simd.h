// The row loop of the SIMD activation quantizers (act_quant_<isa>.cpp),
// written once: each full block of 32 values of a row with one scale per
// block goes to the ISA's `Ops`; partial and padding blocks, and the
// K-quants' shared scales, to the portable code. Ops supplies
//   static float amax32(const float* x);                   // max |x|, NaN skipped
//   static int quant32(const float* x, float inv, int8_t* q);  // codes, returns their sum
// each bit for bit the portable code's (act_quant.cpp): the same
// operations per value in the same order, with maxima and integer sums
// that do not depend on order. Included only by ISA translation units;
// unnamed namespace as in x86_vec.h.
#pragma once
#include <cstdint>

#include "kernels/act_quant.h"

namespace pocket::kernels {
namespace {

template <class Ops>
void quantize_act_rows_simd(const float* x, int t0, int t1, int64_t cols, ActBlocks& a) {
  if (a.scale_block != kActBlock) {
    quantize_act_rows(x, t0, t1, cols, a);
    return;
  }
  const int64_t full = cols / kActBlock;  // blocks of 32 real values
  for (int t = t0; t < t1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * cols;
    int8_t* q = a.q.data() + static_cast<int64_t>(t) * a.kpad;
    float* d_out = a.d.data() + static_cast<int64_t>(t) * a.nb;
    float* s_out = a.s.data() + static_cast<int64_t>(t) * a.nb;
    for (int64_t b = 0; b < full; ++b) {
      const float* xb = xr + b * kActBlock;
      const float d = Ops::amax32(xb) / 127.0f;
      const int sum = Ops::quant32(xb, d > 0.0f ? 1.0f / d : 0.0f, q + b * kActBlock);
      d_out[b] = d;
      s_out[b] = d * static_cast<float>(sum);
    }
    quantize_act_row_blocks(xr, t, full, cols, a);
  }
}

}  // namespace
}  // namespace pocket::kernels
