// Matmul kernels for float weights (F32, F16, BF16), written once against
// the 16-lane vector traits (x86_vec.h: Avx2, Avx512; arm_vec.h: NeonFloat)
// and instantiated by each level: 16 columns per step, the weight chunk
// loaded and widened once per token tile. Traits interface: F, zero_f,
// load_f32, load_f16, load_bf16, fma(a, b, c) = a * b + c, hsum, and the
// scalar half(p) for the tail columns. Unnamed namespace: see
// x86_vec.h.
#pragma once
#include <cstring>

#include "kernels/table.h"
#include "kernels/tiled_kernels.h"

namespace pocket::kernels {
namespace {

inline float bf16_to_float(const uint8_t* p) {
  const uint32_t bits = static_cast<uint32_t>(p[0] | p[1] << 8) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class V, DType D>
typename V::F load_w(const uint8_t* row, int64_t k) {
  if constexpr (D == DType::F32) return V::load_f32(reinterpret_cast<const float*>(row) + k);
  if constexpr (D == DType::F16) return V::load_f16(row + 2 * k);
  return V::load_bf16(row + 2 * k);
}

// Rows per pass: traits with registers for R x T accumulators say so
// (Avx512: 4); each row and token keeps its own accumulator, summed in the
// same order whatever R and T are, so R changes no bit of the result.
template <class V>
constexpr int float_rows_per_pass() {
  if constexpr (requires { V::kFloatRows; }) return V::kFloatRows;
  return 1;
}

// Rows [r, r + R) x tokens [t0, t0 + T): each 16-column weight chunk of the
// R rows is loaded and widened once, each activation chunk once per step.
// `prefetch`: the weight streams are read ahead (prefetch.h), as the
// quantized GEMVs do in a matmul of at most kPrefetchTokens tokens (the
// same results: a prefetch never faults and changes no value).
template <class V, DType D, int R, int T>
void float_rows(const MatmulJob& job, int64_t r, int t0, bool prefetch) {
  const int64_t cols = job.cols, rows = job.rows;
  const int esz = D == DType::F32 ? 4 : 2;
  const uint8_t* row[R];
  for (int i = 0; i < R; ++i) row[i] = job.w + (r + i) * cols * esz;
  typename V::F acc[R][T];
  for (auto& a : acc)
    for (auto& v : a) v = V::zero_f();
  int64_t k = 0;
  // The R rows are one contiguous block, read as R streams of a row each.
  // Rows shorter than kWeightPrefetchBytes (the 512-byte rows of a
  // hidden-256 f16 head) are streams too short for the hardware
  // prefetchers: the rows whole passes (at least kWeightPrefetchBytes)
  // ahead are read at the same column. Longer rows are left to the
  // hardware (prefetching them 2 KB ahead cost pocket-0.3b's f16 decode
  // 3%; docs/benchmarks.md).
  const int64_t row_bytes = cols * esz, pass_bytes = R * row_bytes;
  const int64_t ahead = (kWeightPrefetchBytes + pass_bytes - 1) / pass_bytes * pass_bytes;
  prefetch = prefetch && row_bytes < kWeightPrefetchBytes;
  for (; k + 16 <= cols; k += 16) {
    if (prefetch && (k * esz) % 64 == 0)  // a new cache line of each row
      for (int i = 0; i < R; ++i) __builtin_prefetch(row[i] + k * esz + ahead);
    typename V::F wv[R];
    for (int i = 0; i < R; ++i) wv[i] = load_w<V, D>(row[i], k);
    for (int t = 0; t < T; ++t) {
      const typename V::F xv = V::load_f32(job.x + (t0 + t) * cols + k);
      for (int i = 0; i < R; ++i) acc[i][t] = V::fma(wv[i], xv, acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float s = V::hsum(acc[i][t]);
      for (int64_t j = k; j < cols; ++j) {  // tail columns
        float wj = D == DType::F32   ? reinterpret_cast<const float*>(row[i])[j]
                   : D == DType::F16 ? V::half(row[i] + 2 * j)
                                     : bf16_to_float(row[i] + 2 * j);
        s += wj * job.x[(t0 + t) * cols + j];
      }
      job.y[static_cast<int64_t>(t0 + t) * rows + r + i] = s;
    }
}

template <class V, DType D>
void matmul_float(const MatmulJob& job, int64_t r0, int64_t r1) {
  constexpr int R = float_rows_per_pass<V>();
  int64_t r = r0;
  const bool stream = job.n <= kPrefetchTokens;
  for (; r + R <= r1; r += R)
    for_token_tiles(job.n, [&]<int T>(int t0) { float_rows<V, D, R, T>(job, r, t0, stream && t0 == 0); });
  for (; r < r1; ++r)
    for_token_tiles(job.n, [&]<int T>(int t0) { float_rows<V, D, 1, T>(job, r, t0, stream && t0 == 0); });
}

template <class V>
void install_float_matmul(KernelTable& t) {
  t.matmul[static_cast<int>(DType::F32)] = {matmul_float<V, DType::F32>, false, 1};
  t.matmul[static_cast<int>(DType::F16)] = {matmul_float<V, DType::F16>, false, 1};
  t.matmul[static_cast<int>(DType::BF16)] = {matmul_float<V, DType::BF16>, false, 1};
}

}  // namespace
}  // namespace pocket::kernels
