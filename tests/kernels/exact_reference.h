// The integer-exact reference for the int8-activation matmul kernels
// (MatmulEntry::int8_acts), shared by tests/kernels/test_matmul_exact.cpp and
// the kernel differential fuzz target (fuzz/kernels_diff.cpp). It uses the
// same quantized activations as the kernel (quantize_acts, act_quant.h). Per
// token t, row r and block b of 32 columns, with the weight stored as
// value = scale * code + offset (weight_builders.h records both):
//
//   y[t, r] = sum_b  sw[r,b] * dx[t,b] * I[t,r,b]  +  ow[r,b] * dx[t,b] * S[t,b]
//   I = sum_j code[r, j] * qx[t, j]   (exact int32)     S = sum_j qx[t, j]
//
// evaluated in double, so the only difference left is the kernel's float
// rounding. Free of GoogleTest.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/table.h"
#include "weight_builders.h"

namespace pocket::kernels::test_exact {

// The levels this CPU runs with an int8-activation kernel for `type` (the
// others have nothing to compare against the integer reference).
inline std::vector<Isa> int8_levels(DType type) {
  std::vector<Isa> out;
  for (Isa isa : supported_isas())
    if (kernel_table(isa).matmul[static_cast<int>(type)].int8_acts) out.push_back(isa);
  return out;
}


// A kernel may add up to this much to the stored codes to use an unsigned x
// signed int8 dot and remove bias * sum(x) afterwards (AVX-512 vpdpbusd does
// this for the signed 8-bit types: x86_vec.h kS8Bias). The nibble types are
// already unsigned. It only enlarges the magnitude the rounding is measured
// against, as the kernel's intermediate terms are that large.
inline int max_code_bias(DType t) { return (t == DType::Q8_0 || t == DType::PQ8) ? 128 : 0; }

// The activations padded as the matmul entry point pads them (whole groups
// for PQ types, whole blocks of 32 otherwise).
inline int64_t padded_cols(DType t, int64_t cols, int group) {
  const int64_t unit = is_pq(t) ? group : kActBlock;
  return (cols + unit - 1) / unit * unit;
}

struct ExactRef {
  std::vector<double> y;    // n * rows
  std::vector<double> mag;  // n * rows: sum of |terms| the kernel rounds
  int64_t blocks = 0;       // blocks of 32 per row
  bool padding_zero = true;  // the quantized activations' padding was all 0
};

inline ExactRef exact_reference(const test::BuiltWeight& w, DType type, int64_t rows, int64_t cols,
                                const ActBlocks& a) {
  ExactRef ref;
  ref.blocks = (cols + kActBlock - 1) / kActBlock;
  ref.y.assign(static_cast<size_t>(a.n * rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  const int bias = max_code_bias(type);
  for (int t = 0; t < a.n; ++t) {
    const int8_t* q = a.row(t);
    for (int64_t k = cols; k < a.kpad; ++k) ref.padding_zero = ref.padding_zero && q[k] == 0;
    for (int64_t r = 0; r < rows; ++r) {
      double y = 0, mag = 0;
      for (int64_t b = 0; b < ref.blocks; ++b) {
        int32_t dot = 0, sum = 0, absdot = 0;
        for (int64_t k = b * kActBlock; k < std::min(cols, (b + 1) * kActBlock); ++k) {
          const int c = w.codes[static_cast<size_t>(r * cols + k)];
          dot += c * q[k];
          sum += q[k];
          absdot += (std::abs(c) + bias) * std::abs(q[k]);
        }
        const double sw = w.block_scale[static_cast<size_t>(r * ref.blocks + b)];
        const double ow = w.block_offset[static_cast<size_t>(r * ref.blocks + b)];
        const double dx = a.scales(t)[b];
        y += sw * dx * dot + ow * dx * sum;
        mag += std::fabs(sw * dx) * absdot + (std::fabs(ow) + bias * std::fabs(sw)) * std::fabs(dx * sum);
      }
      ref.y[static_cast<size_t>(t * rows + r)] = y;
      ref.mag[static_cast<size_t>(t * rows + r)] = mag;
    }
  }
  return ref;
}

// The kernel's float rounding: each product, fma and sum rounds once, by at
// most FLT_EPSILON / 2 relative to a partial sum that never exceeds the
// magnitude `mag` of all its terms; a row's result passes through at most
// one accumulation step per block plus a fixed number (<= 10: the scale
// products, the activations' block sums d * S, the group or block
// correction, the horizontal sum of lanes, the final subtraction) of other
// roundings. So |y - ref| <= (blocks + 10) * FLT_EPSILON * mag, twice the
// first-order worst case. For comparison, the 0.1% zero-point error that
// this must catch is ~1e-3 * |offset * sum(x)|, some 10^3 times larger.
inline double rounding_tolerance(const ExactRef& ref, size_t i) {
  return (static_cast<double>(ref.blocks) + 10.0) * FLT_EPSILON * ref.mag[i];
}

}  // namespace pocket::kernels::test_exact
