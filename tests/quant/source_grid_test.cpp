// GGUF weights converted to PQ with their own grid (quant/source_grid.h):
// Q4_K (Q5_K) keeps every code and rounds each sub-block's d*sc and dmin*m
// to fp16 once, so every value is within pq_grid_error_bound() of the
// source's (in double, from the block fields); Q4_0, Q4_1, Q5_0, Q5_1 and
// Q8_0 come out bit for bit; chunked conversion equals the whole; types or scales without an
// exact form are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/gguf_kquant_pack.h"
#include "common/test_util.h"
#include "core/pq_format.h"
#include "kernels/kernels.h"
#include "kernels/weight_builders.h"
#include "quant/source_grid.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket::quant {
namespace {

struct KTensor {
  std::vector<uint8_t> bytes;
  std::vector<test::KBlock> blocks;  // row-major, cols / 256 per row
  TensorView view;
};

// Random Q4_K (or Q5_K) fields, d and dmin in [d_lo, d_hi).
KTensor random_q4_k(int64_t rows, int64_t cols, uint64_t seed, float d_lo, float d_hi, DType type = DType::Q4_K) {
  const int qmax = type == DType::Q5_K ? 31 : 15;
  test::Rng rng(seed);
  KTensor t;
  for (int64_t b = 0; b < rows * cols / 256; ++b) {
    test::KBlock k;
    k.d = f16_to_f32(f32_to_f16(rng.uniform(d_lo, d_hi)));
    k.dmin = f16_to_f32(f32_to_f16(rng.uniform(d_lo, d_hi)));
    for (int s = 0; s < 8; ++s) {
      k.scales.push_back(s == 0 ? 63 : static_cast<int>(rng.next() % 64));  // 63: the widest product
      k.mins.push_back(static_cast<int>(rng.next() % 64));
    }
    for (int i = 0; i < 256; ++i)
      k.codes.push_back(i % 37 == 0 ? qmax : static_cast<int>(rng.next() % static_cast<uint64_t>(qmax + 1)));
    const auto packed = test::pack_block(type, k);
    t.bytes.insert(t.bytes.end(), packed.begin(), packed.end());
    t.blocks.push_back(std::move(k));
  }
  t.view.name = "kquant";
  t.view.type = type;
  t.view.shape = {rows, cols};
  t.view.data = t.bytes.data();
  t.view.nbytes = t.bytes.size();
  return t;
}

TensorView pq_view(const TensorView& src, const std::vector<uint8_t>& bytes) {
  TensorView v = src;
  v.type = source_grid_type(src.type);
  v.group = 32;
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return v;
}

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

TEST(SourceGrid, KQuantsKeepCodesAndRoundScalesOnce) {
  // Normal-range scales (the usual case) and d below fp16's normal range, d*sc on both sides of it.
  for (DType type : {DType::Q4_K, DType::Q5_K})
  for (auto [lo, hi] : {std::pair<float, float>{1e-4f, 3e-2f}, {2e-6f, 6e-6f}}) {
    SCOPED_TRACE(testing::Message() << dtype_name(type) << " " << lo);
    const bool five = type == DType::Q5_K;
    const DType to = five ? DType::PQ5 : DType::PQ4;
    const int64_t rows = 37, cols = 512, groups = cols / 32;
    // The PQ group block as pq_format.h describes it (written out here, not
    // taken from the library): 64-byte header, per 32 columns 4 chunks of
    // nibbles and (PQ5) a 64-byte plane.
    const int64_t gblock = 16 * (32 / 2 + 4 + (five ? 32 / 8 : 0));
    KTensor t = random_q4_k(rows, cols, 7, lo, hi, type);
    ASSERT_TRUE(can_repack_to_pq(t.view));
    ASSERT_EQ(source_grid_type(type), to);
    const std::vector<uint8_t> pq = repack_rows_to_pq(t.view, 0, rows);
    ASSERT_EQ(pq.size(), static_cast<size_t>(pq::padded_rows(rows) / 16 * groups * gblock));
    const TensorView v = pq_view(t.view, pq);
    std::vector<float> got(static_cast<size_t>(cols));
    double worst = 0, worst_ratio = 0;
    int inexact = 0;
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequant_row(v, r, got.data());
      for (int64_t g = 0; g < groups; ++g) {
        const test::KBlock& b = t.blocks[static_cast<size_t>(r * (cols / 256) + g / 8)];
        const int sub = static_cast<int>(g % 8);
        const double s = static_cast<double>(b.d) * b.scales[sub], m = -static_cast<double>(b.dmin) * b.mins[sub];
        // The stored fields: fp16 of s and m, and the same codes.
        const uint8_t* blk = pq.data() + ((r / 16) * groups + g) * gblock;
        const int rr = static_cast<int>(r % 16);
        ASSERT_EQ(u16(blk + 2 * rr), f32_to_f16(static_cast<float>(s)));
        ASSERT_EQ(u16(blk + 32 + 2 * rr), f32_to_f16(static_cast<float>(m)));
        if (f16_to_f32(f32_to_f16(static_cast<float>(s))) != s) ++inexact;
        for (int k = 0; k < 32; ++k) {
          const uint8_t byte = blk[64 + (k / 8) * 64 + 4 * rr + k % 4];
          int code = (k % 8) < 4 ? byte & 0x0f : byte >> 4;
          if (five) code |= (blk[64 + 256 + 4 * rr + k % 4] >> (2 * (k / 8) + ((k % 8) < 4 ? 0 : 1)) & 1) << 4;
          const int i = sub * 32 + k;  // element within the super-block
          ASSERT_EQ(code, b.codes[static_cast<size_t>(i)]) << "row " << r << " column " << g * 32 + k;
          const double want = test::kblock_value(type, b, i);
          const double err = std::fabs(got[static_cast<size_t>(g * 32 + k)] - want);
          const double bound = pq_grid_error_bound(s, m, five ? 31 : 15);
          ASSERT_LE(err, bound) << "row " << r << " column " << g * 32 + k;
          worst = std::max(worst, err);
          if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
        }
      }
    }
    EXPECT_GT(inexact, 0) << "every d*sc was exact in fp16: the rounding bound went untested";
    EXPECT_GT(worst_ratio, 0.05) << "the bound is far looser than the rounding seen";
    RecordProperty("worst_abs_error", std::to_string(worst));
  }
}

TEST(SourceGrid, ExactTypesGiveTheSameValuesBitForBit) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t rows = 21, cols = 96;
    auto w = test::build_weight(t, rows, cols, 0, 5);
    ASSERT_TRUE(can_repack_to_pq(w.view));
    const std::vector<uint8_t> pq = repack_rows_to_pq(w.view, 0, rows);
    const TensorView v = pq_view(w.view, pq);
    EXPECT_EQ(v.type, t == DType::Q4_0 || t == DType::Q4_1 ? DType::PQ4
                      : t == DType::Q8_0                   ? DType::PQ8
                                                           : DType::PQ5);
    std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequant_row(w.view, r, a.data());
      kernels::dequant_row(v, r, b.data());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "row " << r;
    }
  }
}

TEST(SourceGrid, ChunksOfTilesEqualTheWhole) {
  KTensor t = random_q4_k(50, 256, 3, 1e-3f, 1e-2f);
  const std::vector<uint8_t> whole = repack_rows_to_pq(t.view, 0, 50);
  std::vector<uint8_t> parts;
  for (int64_t r0 = 0; r0 < 50; r0 += 16) {
    const auto part = repack_rows_to_pq(t.view, r0, std::min<int64_t>(16, 50 - r0));
    parts.insert(parts.end(), part.begin(), part.end());
  }
  EXPECT_EQ(whole, parts);
  EXPECT_THROW(repack_rows_to_pq(t.view, 8, 16), Error);  // not a tile boundary
}

// The load repacks large tensors piece by piece into one uninitialized
// buffer (Model::repack_weights): every byte must be written, padding rows
// of a partial last tile zero, so the result equals the one-pass repack
// whatever the buffer held. Q8_0 (PQ8) and Q4_K (PQ4), 50 rows (a partial
// tile), pieces of 32 rows.
TEST(SourceGrid, PiecesIntoOneDirtyBufferEqualTheWhole) {
  KTensor k = random_q4_k(50, 256, 3, 1e-3f, 1e-2f);
  auto q8 = test::build_weight(DType::Q8_0, 50, 96, 0, 7);
  for (const TensorView* v : {&k.view, &q8.view}) {
    SCOPED_TRACE(dtype_name(v->type));
    const std::vector<uint8_t> whole = repack_rows_to_pq(*v, 0, 50);
    ASSERT_EQ(static_cast<int64_t>(whole.size()), repacked_bytes(*v, 50));
    std::vector<uint8_t> buf(whole.size(), 0xA5);
    for (int64_t r0 = 0; r0 < 50; r0 += 32)
      ASSERT_TRUE(try_repack_rows_into(*v, r0, std::min<int64_t>(32, 50 - r0), buf.data() + repacked_bytes(*v, r0)));
    EXPECT_EQ(whole, buf);
  }
  q8.bytes[3 * 34 * 5 + 34 + 9] = 0x80;  // row 5 (inside the first whole tile): -128 has no PQ8 form
  std::vector<uint8_t> buf(static_cast<size_t>(repacked_bytes(q8.view, 16)));
  EXPECT_FALSE(try_repack_rows_into(q8.view, 0, 16, buf.data()));
  TensorView q6 = k.view;
  q6.type = DType::Q6_K;
  EXPECT_EQ(repacked_bytes(q6, 16), 0);  // no block-for-block form
}

TEST(SourceGrid, NoExactFormIsRefused) {
  KTensor t = random_q4_k(2, 256, 9, 1e-3f, 1e-2f);
  EXPECT_TRUE(can_repack_to_pq(t.view));
  const uint16_t big = f32_to_f16(60000.0f);  // d * 63 overflows fp16
  std::memcpy(t.bytes.data() + 144, &big, 2);
  EXPECT_FALSE(can_repack_to_pq(t.view));
  // The one-pass load-time form says the same, and the throwing one names it.
  EXPECT_FALSE(try_repack_rows_to_pq(t.view, 0, 2).has_value());
  EXPECT_THROW(repack_rows_to_pq(t.view, 0, 2), Error);
  std::memcpy(t.bytes.data() + 144, t.bytes.data(), 2);
  ASSERT_TRUE(try_repack_rows_to_pq(t.view, 0, 2).has_value());
  EXPECT_EQ(*try_repack_rows_to_pq(t.view, 0, 2), repack_rows_to_pq(t.view, 0, 2));
  TensorView q6 = t.view;
  q6.type = DType::Q6_K;
  EXPECT_FALSE(can_repack_to_pq(q6));
  EXPECT_EQ(source_grid_type(DType::Q6_K), DType::PQ8);
  EXPECT_EQ(source_grid_type(DType::F16), DType::PQ8);
  auto w = test::build_weight(DType::Q8_0, 2, 64, 0, 1);
  ASSERT_TRUE(can_repack_to_pq(w.view));
  const uint8_t code = w.bytes[34 + 2 + 5];
  w.bytes[34 + 2 + 5] = 0x80;  // -128: PQ8 codes are -127..127
  EXPECT_FALSE(can_repack_to_pq(w.view));
  w.bytes[34 + 2 + 5] = code;
  w.view.shape = {2, 48};  // 48 columns: not whole blocks of 32
  EXPECT_FALSE(can_repack_to_pq(w.view));
}

}  // namespace
}  // namespace pocket::quant
