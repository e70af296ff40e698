// Matmul kernels for x86, written once against the vector traits of
// x86_vec.h and instantiated in matmul_avx2.cpp / matmul_avx512.cpp.
// Unnamed namespace for the same reason as x86_vec.h.
//
// Integer kernels take activations quantized to int8 blocks of 32
// (act_quant.h) and compute y = sum_b d_x[b] * (integer dot of block b) with
// the weight scales applied per group; tokens are processed in tiles of up
// to kTokTile so each weight chunk is loaded and unpacked once per tile.
#pragma once
#include <algorithm>

#include "kernels/table.h"
#include "kernels/x86_vec.h"
#include "quant/pq_format.h"

namespace pocket::kernels {
namespace {

constexpr int kTokTile = 4;

// Calls body.template operator()<T>(t0) for token tiles covering [0, n).
template <class Body>
void for_token_tiles(int n, Body&& body) {
  int t0 = 0;
  for (; t0 + kTokTile <= n; t0 += kTokTile) body.template operator()<kTokTile>(t0);
  switch (n - t0) {
    case 3: body.template operator()<3>(t0); break;
    case 2: body.template operator()<2>(t0); break;
    case 1: body.template operator()<1>(t0); break;
    default: break;
  }
}

// ---- PQ4 / PQ8: 16-row tiles, one lane per row (quant/pq_format.h) -------
template <class V, bool Q4, int T>
void pq_tile(const MatmulJob& job, const uint8_t* tile, int64_t row0, int t0) {
  const ActBlocks& a = *job.xq;
  const int g = job.group;
  const int64_t groups = pq::groups_per_row(job.cols, g);
  const int64_t gbytes = pq::group_block_bytes(job.type, g);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  typename V::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = V::zero_f();
  for (int64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* blk = tile + gi * gbytes;
    const uint8_t* data = blk + hdr;
    typename V::F gacc[T];
    float xsum[T];  // sum of the group's dequantized activations
    for (int t = 0; t < T; ++t) gacc[t] = V::zero_f(), xsum[t] = 0.0f;
    for (int sub = 0; sub < g / kActBlock; ++sub) {
      const int64_t b = gi * (g / kActBlock) + sub;
      const int64_t k0 = b * kActBlock;
      typename V::I iacc[T];
      for (int t = 0; t < T; ++t) iacc[t] = V::zero_i();
      if constexpr (Q4) {
        for (int c = 0; c < 4; ++c) {  // 4 chunks x 8 columns
          typename V::I wv = V::load(data + (sub * 4 + c) * 64);
          typename V::I lo = V::low_nibbles(wv), hi = V::high_nibbles(wv);
          for (int t = 0; t < T; ++t) {
            const int8_t* x = a.row(t0 + t) + k0 + c * 8;
            iacc[t] = V::dot_u8s8(iacc[t], lo, V::bcast4(x));
            iacc[t] = V::dot_u8s8(iacc[t], hi, V::bcast4(x + 4));
          }
        }
      } else {
        for (int c = 0; c < 8; ++c) {  // 8 chunks x 4 columns
          typename V::I wv = V::load(data + (sub * 8 + c) * 64);
          for (int t = 0; t < T; ++t) iacc[t] = V::dot_s8s8(iacc[t], wv, V::bcast4(a.row(t0 + t) + k0 + c * 4));
        }
      }
      for (int t = 0; t < T; ++t) {
        gacc[t] = V::fma(V::to_f(iacc[t]), V::set1(a.scales(t0 + t)[b]), gacc[t]);
        xsum[t] += a.sums(t0 + t)[b];
      }
    }
    const typename V::F s = V::load_f16(blk);
    if constexpr (Q4) {
      const typename V::F m = V::load_f16(blk + 32);
      for (int t = 0; t < T; ++t) acc[t] = V::fma(m, V::set1(xsum[t]), V::fma(gacc[t], s, acc[t]));
    } else {
      // dot_s8s8 may have computed sum((q + bias) * x): remove bias * sum(x).
      for (int t = 0; t < T; ++t) {
        typename V::F g_corr = V::fma(V::set1(-static_cast<float>(V::kS8Bias)), V::set1(xsum[t]), gacc[t]);
        acc[t] = V::fma(g_corr, s, acc[t]);
      }
    }
  }
  const int64_t rows = job.rows;
  const int valid = static_cast<int>(std::min<int64_t>(pq::kTileRows, rows - row0));
  for (int t = 0; t < T; ++t) {
    float out[pq::kTileRows];
    V::store(out, acc[t]);
    std::copy(out, out + valid, job.y + static_cast<int64_t>(t0 + t) * rows + row0);
  }
}

template <class V, bool Q4>
void matmul_pq(const MatmulJob& job, int64_t r0, int64_t r1) {
  const int64_t tbytes = pq::tile_bytes(job.type, job.cols, job.group);
  for (int64_t row0 = r0 / pq::kTileRows * pq::kTileRows; row0 < r1; row0 += pq::kTileRows) {
    const uint8_t* tile = job.w + (row0 / pq::kTileRows) * tbytes;
    for_token_tiles(job.n, [&]<int T>(int t0) { pq_tile<V, Q4, T>(job, tile, row0, t0); });
  }
}

// ---- Q4_0 / Q8_0: GGUF row-major blocks, used in place ------------------
// value = d * (u - Bias) with u unsigned for Q4_0 (nibble, Bias 8); for
// Q8_0 the traits' dot8_s8s8 decides the bias (see V::kS8Bias).
template <class V, bool Q4, int T>
void gguf_row(const MatmulJob& job, int64_t r, int t0) {
  const int64_t cols = job.cols, rows = job.rows, nb = cols / 32;
  const int bb = Q4 ? 18 : 34;
  const float bias = Q4 ? 8.0f : static_cast<float>(V::kS8Bias);
  const uint8_t* row = job.w + r * nb * bb;
  const ActBlocks& a = *job.xq;
  __m256 acc[T];
  float corr[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps(), corr[t] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bb;
    const float d = half_to_float(blk);
    __m256i wv;
    if constexpr (Q4) {
      __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      __m128i lo = _mm_and_si128(q, _mm_set1_epi8(0x0f));
      __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0f));
      wv = _mm256_set_m128i(hi, lo);
    } else {
      wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    }
    for (int t = 0; t < T; ++t) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.row(t0 + t) + b * 32));
      const __m256i dot = Q4 ? V::dot8_u8s8(wv, x) : V::dot8_s8s8(wv, x);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * a.scales(t0 + t)[b]), acc[t]);
      corr[t] += d * a.sums(t0 + t)[b];
    }
  }
  for (int t = 0; t < T; ++t) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[t]), _mm256_extractf128_ps(acc[t], 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    job.y[static_cast<int64_t>(t0 + t) * rows + r] = _mm_cvtss_f32(h) - bias * corr[t];
  }
}

template <class V, bool Q4>
void matmul_gguf(const MatmulJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for_token_tiles(job.n, [&]<int T>(int t0) { gguf_row<V, Q4, T>(job, r, t0); });
}

// ---- F32 / F16 / BF16: float dots, 16 columns per step ------------------
template <class V, DType D>
typename V::F load_w(const uint8_t* row, int64_t k) {
  if constexpr (D == DType::F32) return V::load_f32(reinterpret_cast<const float*>(row) + k);
  if constexpr (D == DType::F16) return V::load_f16(row + 2 * k);
  return V::load_bf16(row + 2 * k);
}

template <class V, DType D, int T>
void float_row(const MatmulJob& job, int64_t r, int t0) {
  const int64_t cols = job.cols, rows = job.rows;
  const int esz = D == DType::F32 ? 4 : 2;
  const uint8_t* row = job.w + r * cols * esz;
  typename V::F acc[T];
  for (int t = 0; t < T; ++t) acc[t] = V::zero_f();
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    typename V::F wv = load_w<V, D>(row, k);
    for (int t = 0; t < T; ++t) acc[t] = V::fma(wv, V::load_f32(job.x + (t0 + t) * cols + k), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = V::hsum(acc[t]);
    for (int64_t j = k; j < cols; ++j) {  // tail columns
      float wj = D == DType::F32 ? reinterpret_cast<const float*>(row)[j]
                 : D == DType::F16 ? half_to_float(row + 2 * j)
                                   : bf16_to_float(row + 2 * j);
      s += wj * job.x[(t0 + t) * cols + j];
    }
    job.y[static_cast<int64_t>(t0 + t) * rows + r] = s;
  }
}

template <class V, DType D>
void matmul_float(const MatmulJob& job, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for_token_tiles(job.n, [&]<int T>(int t0) { float_row<V, D, T>(job, r, t0); });
}

template <class V>
void install_x86_matmul(KernelTable& t) {
  auto set = [&](DType d, MatmulFn fn, bool int8, int64_t align) { t.matmul[static_cast<int>(d)] = {fn, int8, align}; };
  set(DType::F32, matmul_float<V, DType::F32>, false, 1);
  set(DType::F16, matmul_float<V, DType::F16>, false, 1);
  set(DType::BF16, matmul_float<V, DType::BF16>, false, 1);
  set(DType::Q8_0, matmul_gguf<V, false>, true, 1);
  set(DType::Q4_0, matmul_gguf<V, true>, true, 1);
  set(DType::PQ4, matmul_pq<V, true>, true, pq::kTileRows);
  set(DType::PQ8, matmul_pq<V, false>, true, pq::kTileRows);
}

}  // namespace
}  // namespace pocket::kernels
