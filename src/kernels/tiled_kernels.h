// ISA-independent kernel templates over 16-lane vector traits (x86_vec.h,
// arm_vec.h): token tiling and the PQ4/PQ5/PQ8 tile kernel. Unnamed namespace:
// each ISA translation unit instantiates its own copy with its own flags.
//
// Integer kernels take activations quantized to int8 blocks of 32
// (act_quant.h) and compute y = sum_b d_x[b] * (integer dot of block b) with
// the weight scales applied per group; tokens are processed in tiles of up
// to kTokTile so each weight chunk is loaded and unpacked once per tile.
#pragma once
#include <algorithm>
#include <type_traits>

#include "kernels/prefetch.h"
#include "kernels/table.h"
#include "core/pq_format.h"

namespace pocket::kernels {
namespace {

constexpr int kTokTile = 4;

// Calls body.template operator()<T>(t0) for token tiles covering [0, n):
// tiles of Max (4 or 8), then at most one of 4, then one of 1-3.
template <int Max = kTokTile, class Body>
void for_token_tiles(int n, Body&& body) {
  static_assert(Max == kTokTile || Max == 2 * kTokTile);
  int t0 = 0;
  for (; t0 + Max <= n; t0 += Max) body.template operator()<Max>(t0);
  if (Max > kTokTile && t0 + kTokTile <= n) body.template operator()<kTokTile>(t0), t0 += kTokTile;
  switch (n - t0) {
    case 3: body.template operator()<3>(t0); break;
    case 2: body.template operator()<2>(t0); break;
    case 1: body.template operator()<1>(t0); break;
    default: break;
  }
}

// ---- PQ4 / PQ5 / PQ8: 16-row tiles, one lane per row (core/pq_format.h) --
// Q is the code width: 4, 5 (PQ4's nibbles plus a bit from the plane, the
// same unsigned dot and s/m correction) or 8.
// A matmul of at most this many tokens (decode, a speculative verify) is
// bound by the weight stream: the first token tile of each weight tile
// prefetches it (prefetch.h), the later ones read it from L1.
constexpr int kPrefetchTokens = 16;

template <class V, int Q, int T>
void pq_tile(const MatmulJob& job, const uint8_t* tile, int64_t row0, int t0, bool prefetch) {
  constexpr int sub_bytes = pq::sub_block_bytes(Q);
  const ActBlocks& a = *job.xq;
  const int g = job.group;
  const int64_t groups = pq::groups_per_row(job.cols, g);
  const int64_t gbytes = pq::group_block_bytes(job.type, g);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  typename V::F acc[T];
  // Each token's activations, scales and sums (computing row() etc. at
  // each use cost an address computation per broadcast).
  const int8_t* xrow[T];
  const float *xd[T], *xs[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = V::zero_f();
    xrow[t] = a.row(t0 + t), xd[t] = a.scales(t0 + t), xs[t] = a.sums(t0 + t);
  }
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
      const uint8_t* sdata = data + sub * sub_bytes;
      if constexpr (Q != 8) {
        [[maybe_unused]] typename V::I plane;
        if constexpr (Q == 5) {
          if (prefetch) prefetch_weights(sdata + pq::kPlaneOffset);
          plane = V::load(sdata + pq::kPlaneOffset);
        }
        // Levels without a widening int8 dot sum a PQ4 block's products in
        // int16 first (x86_vec.h, Avx2::kInt16Sums: exact for 4-bit codes).
        constexpr bool sum16 = V::kInt16Sums && Q == 4;
        [[maybe_unused]] typename V::I s16[T];
        if constexpr (sum16)
          for (int t = 0; t < T; ++t) s16[t] = V::zero_i();
        auto chunk = [&]<int C>(std::integral_constant<int, C>) {  // chunk C: 8 columns
          if (prefetch) prefetch_weights(sdata + C * 64);
          typename V::I wv = V::load(sdata + C * 64);
          typename V::I lo = V::low_nibbles(wv), hi = V::high_nibbles(wv);
          if constexpr (Q == 5) {
            lo = V::template with_bit<2 * C>(lo, plane);
            hi = V::template with_bit<2 * C + 1>(hi, plane);
          }
          const int c = C;
          for (int t = 0; t < T; ++t) {
            const int8_t* x = xrow[t] + k0 + c * 8;
            if constexpr (sum16) {
              s16[t] = V::add16_u8s8(s16[t], lo, V::bcast4(x));
              s16[t] = V::add16_u8s8(s16[t], hi, V::bcast4(x + 4));
            } else {
              iacc[t] = V::dot_u8s8(iacc[t], lo, V::bcast4(x));
              iacc[t] = V::dot_u8s8(iacc[t], hi, V::bcast4(x + 4));
            }
          }
        };
        chunk(std::integral_constant<int, 0>{});
        chunk(std::integral_constant<int, 1>{});
        chunk(std::integral_constant<int, 2>{});
        chunk(std::integral_constant<int, 3>{});
        if constexpr (sum16)
          for (int t = 0; t < T; ++t) iacc[t] = V::widen16(iacc[t], s16[t]);
      } else {
        for (int c = 0; c < 8; ++c) {  // 8 chunks x 4 columns
          if (prefetch) prefetch_weights(sdata + c * 64);
          typename V::I wv = V::load(sdata + c * 64);
          for (int t = 0; t < T; ++t) iacc[t] = V::dot_s8s8(iacc[t], wv, V::bcast4(xrow[t] + k0 + c * 4));
        }
      }
      for (int t = 0; t < T; ++t) {
        gacc[t] = V::fma(V::to_f(iacc[t]), V::set1(xd[t][b]), gacc[t]);
        xsum[t] += xs[t][b];
      }
    }
    const typename V::F s = V::load_f16(blk);
    if constexpr (Q != 8) {
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
    float* y = job.y + static_cast<int64_t>(t0 + t) * rows + row0;
    if (valid == pq::kTileRows) {
      // Straight to y: a copy through a stack buffer read back the AVX2
      // level's two 32-byte stores with one 64-byte load (libc's AVX-512
      // memcpy), a failed store forward per tile and token: 16% of the
      // AVX2 prefill's time in a profile.
      V::store(y, acc[t]);
    } else {
      float out[pq::kTileRows];
      V::store(out, acc[t]);
      std::copy(out, out + valid, y);
    }
  }
}

// The token tile of pq_tile: V::kPqTokTile where a level has the registers
// for more than kTokTile (the tile size changes no result: every token has
// its own accumulators, summed in the same order).
template <class V>
constexpr int pq_token_tile() {
  if constexpr (requires { V::kPqTokTile; })
    return V::kPqTokTile;
  else
    return kTokTile;
}

template <class V, int Q>
void matmul_pq(const MatmulJob& job, int64_t r0, int64_t r1) {
  const int64_t tbytes = pq::tile_bytes(job.type, job.cols, job.group);
  for (int64_t row0 = r0 / pq::kTileRows * pq::kTileRows; row0 < r1; row0 += pq::kTileRows) {
    const uint8_t* tile = job.w + (row0 / pq::kTileRows) * tbytes;
    for_token_tiles<pq_token_tile<V>()>(job.n, [&]<int T>(int t0) {
      pq_tile<V, Q, T>(job, tile, row0, t0, t0 == 0 && job.n <= kPrefetchTokens);
    });
  }
}

}  // namespace
}  // namespace pocket::kernels
