// GGUF Q4_0 and Q4_K re-laid out as PQ4 group 32 (quant/repack.h): Q4_0
// values the same bit for bit, Q4_K values within the fp16 rounding of the
// sub-block scale and offset, on row counts that are and are not whole
// 16-row tiles; weights whose scales PQ4 cannot hold are left alone.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
#include "common/gguf_kquant_pack.h"
#include "kernels/weight_builders.h"
#include "quant/repack.h"
#include "util/half.h"

namespace pocket::quant {
namespace {

TEST(Repack, Q4_0AsPq4IsTheSameValues) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {16, 64}, {37, 96}, {50, 256}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    auto w = test::build_weight(DType::Q4_0, rows, cols, 0, 11 + rows);
    const auto bytes = repack_q4_0_to_pq4(w.view);
    ASSERT_TRUE(bytes.has_value());
    TensorView pq = w.view;
    pq.type = DType::PQ4;
    pq.group = 32;
    pq.data = bytes->data();
    pq.nbytes = bytes->size();
    std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequant_row(w.view, r, a.data());  // checks the view too (size, layout)
      kernels::dequant_row(pq, r, b.data());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "row " << r;
      for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(b[static_cast<size_t>(k)], w.values[static_cast<size_t>(r * cols + k)]);
    }
  }
}

TEST(Repack, ScalesPq4CannotHoldStayQ4_0) {
  auto w = test::build_weight(DType::Q4_0, 3, 64, 0, 5);
  for (float d : {9000.0f, std::numeric_limits<float>::infinity()}) {
    std::vector<uint8_t> bytes = w.bytes;
    const uint16_t h = f32_to_f16(d);  // -8 * 9000 overflows fp16
    std::memcpy(bytes.data() + 18, &h, 2);  // the second block of row 0
    TensorView v = w.view;
    v.data = bytes.data();
    EXPECT_FALSE(repack_q4_0_to_pq4(v).has_value()) << d;
  }
  TensorView other = w.view;
  other.type = DType::Q8_0;
  EXPECT_FALSE(repack_q4_0_to_pq4(other).has_value());
}

// A Q4_K weight from explicit block fields (tests/common/gguf_kquant_pack.h,
// written from the format description), with scales and mins over their
// whole 6-bit range and `d`, `dmin` from the caller.
struct Q4K {
  std::vector<uint8_t> bytes;
  std::vector<test::KBlock> blocks;
  TensorView view;
};
Q4K q4k_weight(int64_t rows, int64_t cols, uint32_t seed, float d_scale = 1e-3f) {
  Q4K w;
  uint32_t x = seed;
  auto next = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < cols / 256; ++sb) {
      test::KBlock b;
      b.d = d_scale * (0.5f + static_cast<float>(next() % 1000) / 1000.0f);
      b.dmin = d_scale * (0.25f + static_cast<float>(next() % 1000) / 1000.0f);
      for (int j = 0; j < 8; ++j) {
        b.scales.push_back(j == 0 ? 63 : j == 1 ? 0 : static_cast<int>(next() % 64));
        b.mins.push_back(j == 0 ? 63 : j == 2 ? 0 : static_cast<int>(next() % 64));
      }
      for (int i = 0; i < 256; ++i) b.codes.push_back(i < 16 ? (i % 2 ? 15 : 0) : static_cast<int>(next() % 16));
      const auto packed = test::pack_block(DType::Q4_K, b);
      w.bytes.insert(w.bytes.end(), packed.begin(), packed.end());
      w.blocks.push_back(std::move(b));
    }
  w.view.name = "q4k";
  w.view.type = DType::Q4_K;
  w.view.shape = {rows, cols};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  return w;
}

TEST(Repack, Q4_KAsPq4IsWithinTheScaleRounding) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 256}, {16, 512}, {37, 768}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    const Q4K w = q4k_weight(rows, cols, static_cast<uint32_t>(rows * 7 + cols));
    const auto bytes = repack_q4_k_to_pq4(w.view);
    ASSERT_TRUE(bytes.has_value());
    TensorView pq = w.view;
    pq.type = DType::PQ4;
    pq.group = 32;
    pq.data = bytes->data();
    pq.nbytes = bytes->size();
    std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequant_row(pq, r, b.data());
      for (int64_t k = 0; k < cols; ++k) {
        const test::KBlock& blk = w.blocks[static_cast<size_t>(r * (cols / 256) + k / 256)];
        const int s = static_cast<int>(k % 256) / 32, q = blk.codes[static_cast<size_t>(k % 256)];
        const double scale = test::rounded_half(blk.d) * blk.scales[s], offset = test::rounded_half(blk.dmin) * blk.mins[s];
        const double want = test::kblock_value(DType::Q4_K, blk, static_cast<int>(k % 256));
        // fp16 rounding of scale and offset (2^-11 each, relative) plus the
        // float evaluation of s * q + m.
        const double bound = std::ldexp(1.0, -11) * (scale * q + offset) + 2 * FLT_EPSILON * (scale * q + offset);
        const double err = std::fabs(b[static_cast<size_t>(k)] - want);
        ASSERT_LE(err, bound) << "row " << r << " column " << k;
        if (scale * q + offset > 0) worst = std::max(worst, err / (scale * q + offset));
      }
    }
    EXPECT_GT(worst, 0.0);  // fp16 really rounds some scales: the test is not vacuous
  }
}

TEST(Repack, Q4_KScalesOutsideFp16sNormalRangeStayQ4_K) {
  // d * 63 above 65504, or in fp16's subnormal range (d * sc < 2^-14 but not 0).
  for (float d : {2000.0f, 2e-7f}) {
    const Q4K w = q4k_weight(3, 256, 9, d);
    EXPECT_FALSE(repack_q4_k_to_pq4(w.view).has_value()) << d;
  }
  const Q4K w = q4k_weight(3, 256, 9);
  std::vector<uint8_t> bytes = w.bytes;
  const uint16_t inf = f32_to_f16(std::numeric_limits<float>::infinity());
  std::memcpy(bytes.data() + 144 + 2, &inf, 2);  // dmin of row 1
  TensorView v = w.view;
  v.data = bytes.data();
  EXPECT_FALSE(repack_q4_k_to_pq4(v).has_value());
  TensorView other = w.view;
  other.type = DType::Q5_K;
  EXPECT_FALSE(repack_q4_k_to_pq4(other).has_value());
}

}  // namespace
}  // namespace pocket::quant
