// GGUF Q4_0 re-laid out as PQ4 group 32 (quant/repack.h): every value the
// same bit for bit, on row counts that are and are not whole 16-row tiles,
// and weights whose scales PQ4 cannot hold exactly are left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
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

}  // namespace
}  // namespace pocket::quant
