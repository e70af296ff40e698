// AMX level (Intel Advanced Matrix Extensions: Sapphire Rapids and later):
// the AVX-512 VBMI table, with the PQ4 / PQ5 / PQ8 matmuls of several tokens
// (prefill, a speculative verify) run on the tile unit. One TDPBSUD computes
// a 32-column block's integer dots for 16 tokens x 16 weight rows (8,192
// multiply-adds, the work of 128 vpdpbusd); the float part after it (scales,
// group sums) is the one pq_tile does, in the same order, so every result is
// bit-identical to the AVX-512 levels' (batch invariance: a one-token decode
// step, which stays on pq_tile, gives the logits a verify gives).
//
// Data flow per 16-row weight tile: the codes of up to kChunkCols columns
// are unpacked once into the layout TDPBSUD's B operand wants, which is the
// PQ formats' own (a 32-bit lane holds one row's 4 consecutive columns), so
// the unpacking is pq_tile's nibble split stored instead of used; then each
// tile of 16 tokens loads its int8 activations straight from ActBlocks
// (A operand: one token per tile row, stride = the padded row length).
// Installed over install_avx512vbmi's table only where isa.cpp found AMX-INT8
// and the kernel granted this process the tile state (arch_prctl).
#include <immintrin.h>

#include <algorithm>

#include "kernels/table.h"
#include "kernels/tiled_kernels.h"
#include "kernels/x86_vec.h"

namespace pocket::kernels {
namespace {

using V = Avx512Vbmi;

// Below this many tokens the VNNI tile kernel (pq_tile, 8-token tiles on
// AVX-512) is as fast or faster: a tile pass costs about the same for 4
// tokens as for 16 (unpacking the codes, loading and storing whole tiles)
// while pq_tile's cost grows with the tokens. Measured as pocket-0.3b
// verify forwards after a 512-token prompt (one thread, pinned, median of
// 25): 8 tokens 24.4-25.8 ms with pq_tile vs 28.0-30.0 with AMX, 10
// tokens 34.9-38.0 vs 35.1-36.8, 12 tokens 39.3-41.2 vs 38.6-39.0, 16
// tokens 48.0-56.8 vs 46.6-48.3. (With 4-token tiles the crossing was 7.)
constexpr int kAmxMinTokens = 12;
// Columns unpacked per pass: 64 blocks x 512 bytes = 32 KB, within L1.
constexpr int kChunkCols = 2048;
constexpr int kTileTokens = 16;

// The LDTILECFG operand (palette 1): bytes per row and rows of each tile.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-3: C, one per 32-column block of a group (<= 4: groups are at most
// 128 columns), m tokens x 16 int32. Tiles 4, 5: A, m tokens x 32 int8.
// Tiles 6, 7: B, 8 rows of 4 columns x 16 weight rows.
void configure(int m) {
  TileConfig c;
  for (int i = 0; i < 4; ++i) c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = 64;
  for (int i = 4; i < 6; ++i) c.rows[i] = static_cast<uint8_t>(m), c.colsb[i] = 32;
  for (int i = 6; i < 8; ++i) c.rows[i] = 8, c.colsb[i] = 64;
  _tile_loadconfig(&c);
}

// Tile C = A x B for one 32-column block (x: m tokens' int8 activations,
// x_stride apart; w: the block's 512 unpacked code bytes), and the store of
// a C tile as 16 int32 per token (64-byte rows). Macros: GCC's tile
// intrinsics take the tile numbers as literal tokens.
#define POCKET_AMX_DOTS(C, A, B, x, x_stride, w) \
  do {                                            \
    _tile_loadd(A, x, x_stride);                  \
    _tile_loadd(B, w, 64);                        \
    _tile_zero(C);                                \
    _tile_dpbsud(C, A, B);                        \
  } while (0)
#define POCKET_AMX_STORE(C, out) _tile_stored(C, out, 64)

// The B operand of each 32-column block of groups [g0, g1) of one weight
// tile: 8 rows of 64 bytes, row j = columns 4j..4j+3 of the 16 weight rows,
// as unsigned bytes (PQ8: biased by +128, as Avx512::dot_s8s8 does).
template <int Q>
void unpack(const MatmulJob& job, const uint8_t* tile, int64_t g0, int64_t g1, uint8_t* out, bool prefetch) {
  constexpr int sub_bytes = pq::sub_block_bytes(Q);
  const int nsub = job.group / kActBlock;
  const int64_t gbytes = pq::group_block_bytes(job.type, job.group);
  const int hdr = static_cast<int>(pq::header_bytes(job.type));
  for (int64_t gi = g0; gi < g1; ++gi) {
    const uint8_t* data = tile + gi * gbytes + hdr;
    for (int sub = 0; sub < nsub; ++sub, out += 512) {
      const uint8_t* sdata = data + sub * sub_bytes;
      if constexpr (Q == 8) {
        for (int c = 0; c < 8; ++c) {
          if (prefetch) prefetch_weights(sdata + c * 64);
          _mm512_store_si512(out + c * 64, _mm512_xor_si512(V::load(sdata + c * 64), _mm512_set1_epi8(-128)));
        }
      } else {
        [[maybe_unused]] V::I plane;
        if constexpr (Q == 5) {
          if (prefetch) prefetch_weights(sdata + pq::kPlaneOffset);
          plane = V::load(sdata + pq::kPlaneOffset);
        }
        auto chunk = [&]<int C>(std::integral_constant<int, C>) {
          if (prefetch) prefetch_weights(sdata + C * 64);
          V::I wv = V::load(sdata + C * 64);
          V::I lo = V::low_nibbles(wv), hi = V::high_nibbles(wv);
          if constexpr (Q == 5) {
            lo = V::template with_bit<2 * C>(lo, plane);
            hi = V::template with_bit<2 * C + 1>(hi, plane);
          }
          _mm512_store_si512(out + 2 * C * 64, lo);
          _mm512_store_si512(out + (2 * C + 1) * 64, hi);
        };
        chunk(std::integral_constant<int, 0>{});
        chunk(std::integral_constant<int, 1>{});
        chunk(std::integral_constant<int, 2>{});
        chunk(std::integral_constant<int, 3>{});
      }
    }
  }
}

// The integer dots of one group's blocks (x: the group's first activation
// column of token t0; w: its unpacked codes) into C tiles, and their
// stores. Groups of at most 2 blocks use C tiles 0-1 (set 0) or 2-3 (set 1),
// so one group's dots can be multiplied while the other's are stored and
// scaled; a 4-block group takes all four. A and B tiles alternate between
// blocks.
inline void group_dots(const int8_t* x, int64_t stride, const uint8_t* w, int nsub, int set) {
  if (nsub > 2) {
    POCKET_AMX_DOTS(0, 4, 6, x, stride, w);
    POCKET_AMX_DOTS(1, 5, 7, x + kActBlock, stride, w + 512);
    POCKET_AMX_DOTS(2, 4, 6, x + 2 * kActBlock, stride, w + 1024);
    POCKET_AMX_DOTS(3, 5, 7, x + 3 * kActBlock, stride, w + 1536);
  } else if (set == 0) {
    POCKET_AMX_DOTS(0, 4, 6, x, stride, w);
    if (nsub > 1) POCKET_AMX_DOTS(1, 5, 7, x + kActBlock, stride, w + 512);
  } else {
    POCKET_AMX_DOTS(2, 4, 6, x, stride, w);
    if (nsub > 1) POCKET_AMX_DOTS(3, 5, 7, x + kActBlock, stride, w + 512);
  }
}

inline void store_dots(int nsub, int set, int32_t (*dots)[kTileTokens * 16]) {
  if (nsub > 2) {
    POCKET_AMX_STORE(0, dots[0]);
    POCKET_AMX_STORE(1, dots[1]);
    POCKET_AMX_STORE(2, dots[2]);
    POCKET_AMX_STORE(3, dots[3]);
  } else if (set == 0) {
    POCKET_AMX_STORE(0, dots[0]);
    if (nsub > 1) POCKET_AMX_STORE(1, dots[1]);
  } else {
    POCKET_AMX_STORE(2, dots[0]);
    if (nsub > 1) POCKET_AMX_STORE(3, dots[1]);
  }
}

// acc[t] (16 rows of token t0 + t, t < m) over groups [g0, g1), from the
// unpacked codes w. The float steps and their order are pq_tile's. For
// groups of up to 2 blocks the tile unit works one group ahead: group gi + 1
// is multiplied while group gi's dots are stored and scaled. NSUB: blocks
// per group; M: tokens (16), or 0 for a tail of m < 16.
template <int Q, int NSUB, int M, class Between>
void tokens_tile(const MatmulJob& job, const uint8_t* tile, int64_t g0, int64_t g1, const uint8_t* w, int t0,
                 int m_tail, float* acc, Between&& between) {
  const int m = M ? M : m_tail;
  const ActBlocks& a = *job.xq;
  const int64_t gbytes = pq::group_block_bytes(job.type, job.group);
  const int64_t stride = a.kpad;
  // Group gi's dots go to dots[gi & 1] and are scaled one group later: the
  // vector loads of a tile store wait until it reaches the cache, which (as
  // stores leave in order) is after every tile op issued before it.
  alignas(64) int32_t dots[2][4][kTileTokens * 16];
  auto scale = [&](int64_t gi) {
    const int32_t(*gd)[kTileTokens * 16] = dots[(gi - g0) & 1];
    const int64_t b0 = gi * NSUB;
    const uint8_t* blk = tile + gi * gbytes;
    const V::F s = V::load_f16(blk);
    [[maybe_unused]] V::F mins;
    if constexpr (Q != 8) mins = V::load_f16(blk + 32);
    for (int t = 0; t < m; ++t) {
      const float* d = a.scales(t0 + t) + b0;
      const float* sums = a.sums(t0 + t) + b0;
      V::F g = V::zero_f();
      float xsum = 0.0f;
      for (int sub = 0; sub < NSUB; ++sub) {
        g = V::fma(V::to_f(_mm512_load_si512(gd[sub] + t * 16)), V::set1(d[sub]), g);
        xsum += sums[sub];
      }
      V::F at = _mm512_load_ps(acc + t * 16);
      if constexpr (Q != 8) {
        at = V::fma(mins, V::set1(xsum), V::fma(g, s, at));
      } else {
        V::F g_corr = V::fma(V::set1(-static_cast<float>(V::kS8Bias)), V::set1(xsum), g);
        at = V::fma(g_corr, s, at);
      }
      _mm512_store_ps(acc + t * 16, at);
    }
  };
  constexpr bool ahead = NSUB <= 2;  // room in the C tiles for the next group's dots
  auto x_of = [&](int64_t gi) { return a.row(t0) + gi * NSUB * kActBlock; };
  if (ahead) group_dots(x_of(g0), stride, w, NSUB, 0);
  for (int64_t gi = g0; gi < g1; ++gi, w += NSUB * 512) {
    const int set = static_cast<int>((gi - g0) & 1);
    if (!ahead)
      group_dots(x_of(gi), stride, w, NSUB, 0);
    else if (gi + 1 < g1)
      group_dots(x_of(gi + 1), stride, w + NSUB * 512, NSUB, set ^ 1);
    store_dots(NSUB, ahead ? set : 0, dots[set]);
    between(gi - g0);
    if (gi > g0) scale(gi - 1);
  }
  scale(g1 - 1);
}

// One weight tile's groups [g0, g1) (at most kChunkCols columns).
struct Piece {
  const uint8_t* tile;
  int64_t row0, g0, g1;
};

template <int Q, int NSUB>
void matmul_amx(const MatmulJob& job, int64_t r0, int64_t r1) {
  const int64_t tbytes = pq::tile_bytes(job.type, job.cols, job.group);
  const int64_t groups = pq::groups_per_row(job.cols, job.group);
  const int64_t chunk_groups = std::max<int64_t>(1, kChunkCols / job.group);
  const int64_t chunks = (groups + chunk_groups - 1) / chunk_groups;
  const int64_t first_row = r0 / pq::kTileRows * pq::kTileRows;
  const int64_t pieces = (r1 - first_row + pq::kTileRows - 1) / pq::kTileRows * chunks;
  auto piece = [&](int64_t i) {
    const int64_t row0 = first_row + i / chunks * pq::kTileRows, g0 = i % chunks * chunk_groups;
    return Piece{job.w + (row0 / pq::kTileRows) * tbytes, row0, g0, std::min(groups, g0 + chunk_groups)};
  };
  const bool prefetch = job.n <= kPrefetchTokens;
  constexpr int64_t kPieceBytes = kChunkCols / kActBlock * 512;
  alignas(64) uint8_t codes[2][kPieceBytes];
  alignas(64) float acc[kTileTokens * 16];
  const int full = job.n / kTileTokens * kTileTokens, tail = job.n - full;
  // A matmul of one token tile (a verify) unpacks the next piece while this
  // one is multiplied, a group at a time: its weight stream then overlaps
  // the tile unit's work, and its stores have left before the tile loads
  // read them. Larger ones unpack a piece once for all their token tiles.
  const bool one_tile = job.n <= kTileTokens;
  if (one_tile) {
    configure(job.n);
    const Piece p0 = piece(0);
    unpack<Q>(job, p0.tile, p0.g0, p0.g1, codes[0], prefetch);
  }
  int configured = one_tile ? job.n : 0;
  for (int64_t i = 0; i < pieces; ++i) {
    const Piece p = piece(i);
    const int valid = static_cast<int>(std::min<int64_t>(pq::kTileRows, job.rows - p.row0));
    const uint8_t* w = codes[one_tile ? i & 1 : 0];
    if (!one_tile) unpack<Q>(job, p.tile, p.g0, p.g1, codes[0], prefetch);
    for (int t0 = 0; t0 < job.n; t0 += kTileTokens) {
      const int m = t0 < full ? kTileTokens : tail;
      if (configured != m) configure(m), configured = m;
      // The accumulators live in y between pieces (a float stored and
      // loaded back is the same float); rows past `valid` are masked off.
      const __mmask16 rows_mask = static_cast<__mmask16>((1u << valid) - 1);
      for (int t = 0; t < m; ++t) {
        const float* y = job.y + static_cast<int64_t>(t0 + t) * job.rows + p.row0;
        _mm512_store_ps(acc + t * 16, p.g0 == 0 ? V::zero_f() : _mm512_maskz_loadu_ps(rows_mask, y));
      }
      // One token tile: the next piece is unpacked a group at a time inside
      // tokens_tile, and any groups it has beyond this piece's after it.
      const bool more = one_tile && i + 1 < pieces;
      const Piece next = more ? piece(i + 1) : p;
      uint8_t* out = codes[(i + 1) & 1];
      auto unpack_next = [&](int64_t j) {
        if (more && next.g0 + j < next.g1)
          unpack<Q>(job, next.tile, next.g0 + j, next.g0 + j + 1, out + j * NSUB * 512, prefetch);
      };
      if (m == kTileTokens)
        tokens_tile<Q, NSUB, kTileTokens>(job, p.tile, p.g0, p.g1, w, t0, m, acc, unpack_next);
      else
        tokens_tile<Q, NSUB, 0>(job, p.tile, p.g0, p.g1, w, t0, m, acc, unpack_next);
      if (more && next.g1 - next.g0 > p.g1 - p.g0)
        unpack<Q>(job, next.tile, next.g0 + (p.g1 - p.g0), next.g1, out + (p.g1 - p.g0) * NSUB * 512, prefetch);
      for (int t = 0; t < m; ++t)  // (std::copy here was a memmove call per token and tile: 1.7% of a verify)
        _mm512_mask_storeu_ps(job.y + static_cast<int64_t>(t0 + t) * job.rows + p.row0, rows_mask,
                              _mm512_load_ps(acc + t * 16));
    }
  }
  _tile_release();
}

template <int Q>
void matmul_pq_amx(const MatmulJob& job, int64_t r0, int64_t r1) {
  if (job.n < kAmxMinTokens) return matmul_pq<V, Q>(job, r0, r1);
  switch (job.group / kActBlock) {
    case 1: return matmul_amx<Q, 1>(job, r0, r1);
    case 2: return matmul_amx<Q, 2>(job, r0, r1);
    default: return matmul_amx<Q, 4>(job, r0, r1);
  }
}

#undef POCKET_AMX_DOTS
#undef POCKET_AMX_STORE

}  // namespace

void install_amx(KernelTable& t) {
  t.matmul[static_cast<int>(DType::PQ4)] = {matmul_pq_amx<4>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ5)] = {matmul_pq_amx<5>, true, pq::kTileRows};
  t.matmul[static_cast<int>(DType::PQ8)] = {matmul_pq_amx<8>, true, pq::kTileRows};
}

}  // namespace pocket::kernels
