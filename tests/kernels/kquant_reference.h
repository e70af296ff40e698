// Test-side K-quant weights and their integer-exact matmul reference, shared
// by tests/kernels/test_matmul_kquant.cpp and the kernel differential fuzz
// target (fuzz/kernels_diff.cpp). Weights are packed from their block fields
// by tests/common/gguf_kquant_pack.h (not the library's encoder). With the
// kernel's own quantized activations (quantize_acts with the entry's
// act_scale_block: one scale dx per 256 columns for these types), per token
// t, row r and sub-block s (32 elements for Q4_K/Q5_K, 16 for Q6_K) inside
// activation block b:
//
//   y[t, r] = sum_s  (d * sc[s]) * dx[t,b] * I[s]  -  (dmin * m[s]) * dx[t,b] * S[s]
//   I = sum code * qx (Q6_K: code - 32)   S = sum qx   (exact integers)
//
// in double, so what is left is the kernel's float rounding, bounded as in
// exact_reference.h. Free of GoogleTest.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/gguf_kquant_pack.h"
#include "kernels/act_quant.h"

namespace pocket::kernels::test_kquant {

inline int max_code(DType t) { return t == DType::Q4_K ? 15 : t == DType::Q5_K ? 31 : 63; }

struct KWeight {
  std::vector<uint8_t> bytes;
  std::vector<test::KBlock> blocks;  // rows * cols / 256, row-major
  TensorView view;
};

// fill(r, sb, block) sets d, dmin, scales (and mins, not for Q6_K) and the
// 256 codes of super-block sb of row r; the codes within [0, max_code(t)],
// scales within [0, 63] (Q6_K: [-128, 127]), mins within [0, 63].
using BlockFn = std::function<void(int64_t r, int64_t sb, test::KBlock& b)>;

inline KWeight build_kweight(DType t, int64_t rows, int64_t cols, const BlockFn& fill) {
  KWeight w;
  const int64_t nsb = cols / 256;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < nsb; ++sb) {
      test::KBlock b;
      fill(r, sb, b);
      const auto packed = test::pack_block(t, b);
      w.bytes.insert(w.bytes.end(), packed.begin(), packed.end());
      w.blocks.push_back(std::move(b));
    }
  w.view.name = "test";
  w.view.type = t;
  w.view.shape = {rows, cols};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  return w;
}

struct ExactRef {
  std::vector<double> y, mag;  // n * rows; mag: sum of |terms| the kernel rounds
};

inline ExactRef exact_reference(DType t, const KWeight& w, int64_t rows, int64_t cols, const ActBlocks& a) {
  const int sub = test::sub_block_size(t);
  const int64_t nsb = cols / 256;
  ExactRef ref;
  ref.y.assign(static_cast<size_t>(a.n * rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  for (int tok = 0; tok < a.n; ++tok) {
    const int8_t* q = a.row(tok);
    for (int64_t r = 0; r < rows; ++r) {
      double y = 0, mag = 0;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const test::KBlock& b = w.blocks[static_cast<size_t>(r * nsb + sb)];
        const double d = test::rounded_half(b.d), dmin = test::rounded_half(b.dmin);
        for (int s = 0; s < 256 / sub; ++s) {
          int64_t dot = 0, sum = 0, absdot = 0, absdot_u = 0;
          for (int i = s * sub; i < (s + 1) * sub; ++i) {
            const int code = b.codes[static_cast<size_t>(i)] - (t == DType::Q6_K ? 32 : 0);
            const int x = q[sb * 256 + i];
            dot += code * x;
            sum += x;
            absdot += std::abs(code) * std::abs(x);
            absdot_u += b.codes[static_cast<size_t>(i)] * std::abs(x);
          }
          // The x86 levels dot Q6_K's unsigned codes (0..63) and take the
          // bias of 32 off through the activation sums (X86Blocks::
          // kQ6Unsigned): their partial sums, spread over 8 lanes and
          // rounded apart, reach sum(code * |x|) + 32 * |sum(x)| even where
          // the true terms cancel (a fuzz finding, docs/reliability.md).
          if (t == DType::Q6_K) absdot = std::max(absdot, absdot_u + 32 * std::abs(sum));
          const double dx = a.scales(tok)[(sb * 256 + s * sub) / kActBlock];
          const double scale = d * b.scales[static_cast<size_t>(s)];
          const double offset = t == DType::Q6_K ? 0.0 : dmin * b.mins[static_cast<size_t>(s)];
          y += scale * dx * static_cast<double>(dot) - offset * dx * static_cast<double>(sum);
          mag += std::fabs(scale * dx) * static_cast<double>(absdot) + offset * std::fabs(dx * static_cast<double>(sum));
        }
      }
      ref.y[static_cast<size_t>(tok * rows + r)] = y;
      ref.mag[static_cast<size_t>(tok * rows + r)] = mag;
    }
  }
  return ref;
}

// As exact_reference.h: at most one accumulation step per activation block
// plus a fixed number of other roundings, each FLT_EPSILON / 2 of a partial
// sum below `mag`, doubled.
inline double rounding_tolerance(const ExactRef& ref, int64_t cols, size_t i) {
  return (static_cast<double>(cols / kActBlock) + 10.0) * FLT_EPSILON * ref.mag[i];
}

// The weight's value at row r, column k, as the format defines it (double).
inline double kweight_value(DType t, const KWeight& w, int64_t cols, int64_t r, int64_t k) {
  return test::kblock_value(t, w.blocks[static_cast<size_t>(r * (cols / 256) + k / 256)], static_cast<int>(k % 256));
}

}  // namespace pocket::kernels::test_kquant
