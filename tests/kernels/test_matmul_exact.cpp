// The int8-activation matmul kernels (MatmulEntry::int8_acts) on every level
// against the integer-exact reference of exact_reference.h, which uses the
// kernel's own quantized activations, so only float rounding is tolerated.
// test_matmul.cpp keeps the end-to-end bound against the float reference
// (which must allow the activation quantization error, a bound that grows
// with sum|w|); this file is what catches a 0.1% error in a zero-point
// correction or a scale.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>

#include "kernels/act_quant.h"
#include "kernels/table.h"
#include "kernels/exact_reference.h"
#include "kernels/weight_builders.h"
#include "core/pq_format.h"

namespace pocket::kernels {
namespace {

using test::BuiltWeight;
using test::build_weight;
using test::Rng;
using namespace test_exact;

// Every weight type this file has an exact reference for; the coverage test
// below fails if some level gains an int8 kernel for a type not listed.
constexpr DType kInt8Types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::PQ4, DType::PQ5, DType::PQ8};

std::vector<float> exact_x(int n, int64_t cols, uint64_t seed) { return test::varied_activations(n, cols, seed); }

void check_exact(Isa isa, DType type, const BuiltWeight& w, int64_t rows, int64_t cols, int group,
                 const std::vector<float>& x, int n) {
  const KernelTable& table = kernel_table(isa);
  ASSERT_TRUE(table.matmul[static_cast<int>(type)].int8_acts);
  ActBlocks a;
  quantize_acts(x.data(), n, cols, padded_cols(type, cols, group), a);
  const ExactRef ref = exact_reference(w, type, rows, cols, a);
  ASSERT_TRUE(ref.padding_zero) << "quantize_acts left non-zero padding";
  std::vector<float> y(static_cast<size_t>(n * rows), NAN);
  matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      ASSERT_NEAR(y[i], ref.y[i], rounding_tolerance(ref, i))
          << "t=" << t << " r=" << r << " (|terms| = " << ref.mag[i] << ", relative error "
          << std::fabs(y[i] - ref.y[i]) / ref.mag[i] << ")";
    }
}

using test_exact::int8_levels;

using Shape = test::WeightShape;

class MatmulExactTest : public testing::TestWithParam<DType> {};

TEST_P(MatmulExactTest, MatchesIntegerReferenceOnOddShapes) {
  const DType type = GetParam();
  const auto levels = int8_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no int8 kernel for " << dtype_name(type) << " on this CPU";
  // Rows: 1, below / above / not a multiple of the 16-row tile; cols: one
  // block up to 12 blocks, several groups, and (PQ) a partial last group.
  std::vector<Shape> shapes;
  if (is_pq(type))
    shapes = {{1, 32, 32}, {16, 256, 128}, {35, 320, 64}, {50, 200, 64}, {17, 384, 128}, {3, 70, 32},
              {20, 2600, 64}};  // past the AMX level's 2048-column pieces, with a partial last group
  else
    shapes = {{1, 32, 0}, {17, 96, 0}, {35, 320, 0}, {50, 384, 0}};
  for (const Shape& s : shapes) {
    auto w = build_weight(type, s.rows, s.cols, s.group, 500 + s.rows * 3 + s.cols);
    // n = 1 (decode), then every token-tile remainder and odd prefill sizes
    // (37: past the GGUF kernels' chunk of 32 tokens).
    for (int n : {1, 2, 3, 4, 5, 7, 13, 37}) {
      if (s.cols > 2048 && n != 1 && n != 13 && n != 37) continue;  // the wide shape: decode and tile paths only
      auto x = exact_x(n, s.cols, 900 + n + s.cols);
      for (Isa isa : levels) {
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " rows=" << s.rows
                                        << " cols=" << s.cols << " group=" << s.group << " n=" << n);
        check_exact(isa, type, w, s.rows, s.cols, s.group, x, n);
      }
    }
  }
}

// Extreme codes and activations: every code at the ends of its range (and
// alternating between them), activations of constant magnitude so every
// block quantizes them to +-127, with signs chosen so that all products of
// a row have the same sign (largest integer sums) or alternate.
TEST_P(MatmulExactTest, ExtremeCodesMatchIntegerReference) {
  const DType type = GetParam();
  const auto levels = int8_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no int8 kernel for " << dtype_name(type) << " on this CPU";
  const bool nibble = type == DType::Q4_0 || type == DType::Q4_1 || type == DType::PQ4;
  const bool five = type == DType::Q5_0 || type == DType::Q5_1 || type == DType::PQ5;
  const int lo = nibble || five ? 0 : (type == DType::Q8_0 ? -128 : -127), hi = nibble ? 15 : five ? 31 : 127;
  const int64_t rows = 37, cols = 256;
  // 21 tokens: a full 16-token tile and a tail of 5 on the AMX level (which
  // takes 12 or more); on the VNNI levels 8-token tiles (AVX-512) or
  // 4-token tiles (AVX2), then a tile of 4 and a tail of 1.
  const int n = 21;
  for (int group : {32, 128}) {
    if (!is_pq(type) && group != 32) continue;
    // Row pattern r % 4: all hi, all lo, alternating hi/lo by column, by block.
    auto code = [&](int64_t r, int64_t k) {
      switch (r % 4) {
        case 0: return hi;
        case 1: return lo;
        case 2: return k % 2 ? lo : hi;
        default: return (k / 32) % 2 ? lo : hi;
      }
    };
    auto w = build_weight(type, rows, cols, group, 77 + group, code);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (int t = 0; t < n; ++t)
      for (int64_t k = 0; k < cols; ++k) {
        const float mag = 0.5f + 0.25f * t;
        float sign = 1.0f;
        if (t == 1) sign = -1.0f;
        if (t == 2) sign = k % 2 ? -1.0f : 1.0f;  // products of rows 2 mod 4 all of one sign
        if (t == 3) sign = (k / 32) % 2 ? -1.0f : 1.0f;
        x[static_cast<size_t>(t * cols + k)] = sign * mag;
      }
    for (Isa isa : levels) {
      SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " group=" << group);
      check_exact(isa, type, w, rows, cols, group, x, n);
      // And as decode, one token at a time through the n = 1 path.
      for (int t = 0; t < n; ++t) {
        std::vector<float> x1(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        SCOPED_TRACE(testing::Message() << "decode token " << t);
        check_exact(isa, type, w, rows, cols, group, x1, 1);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Types, MatmulExactTest, testing::ValuesIn(kInt8Types),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The reference itself: its decomposition into codes, scales and offsets
// must agree with the encoded values the float reference uses (dot of the
// values with the dequantized activations d * q, in double). Values like
// s * q + m were rounded to float once when encoded, so allow FLT_EPSILON
// times sum |w x|.
TEST(MatmulExact, ReferenceAgreesWithEncodedValues) {
  for (DType type : kInt8Types) {
    const int64_t rows = 21, cols = 200 - (is_pq(type) ? 0 : 8);  // 192 for the GGUF types
    const int group = is_pq(type) ? 64 : 0;
    auto w = build_weight(type, rows, cols, group, 3);
    const int n = 3;
    auto x = exact_x(n, cols, 4);
    ActBlocks a;
    quantize_acts(x.data(), n, cols, padded_cols(type, cols, group), a);
    const ExactRef ref = exact_reference(w, type, rows, cols, a);
    for (int t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double y = 0, mag = 0;
        for (int64_t k = 0; k < cols; ++k) {
          const double xk = static_cast<double>(a.scales(t)[k / 32]) * a.row(t)[k];
          y += w.values[static_cast<size_t>(r * cols + k)] * xk;
          mag += std::fabs(w.values[static_cast<size_t>(r * cols + k)] * xk);
        }
        ASSERT_NEAR(ref.y[static_cast<size_t>(t * rows + r)], y, FLT_EPSILON * mag + 1e-30)
            << dtype_name(type) << " t=" << t << " r=" << r;
      }
  }
}

// Every level's int8 kernels are covered: no level may have an int8 kernel
// for a type that neither this file nor test_matmul_kquant.cpp (the
// K-quants) has a reference for, and every SIMD level has all eleven.
TEST(MatmulExact, CoversEveryInt8Kernel) {
  std::set<DType> covered(std::begin(kInt8Types), std::end(kInt8Types));
  covered.insert({DType::Q4_K, DType::Q5_K, DType::Q6_K});
  for (Isa isa : supported_isas()) {
    const KernelTable& table = kernel_table(isa);
    int count = 0;
    for (int i = 0; i < kNumDTypes; ++i) {
      if (!table.matmul[i].int8_acts) continue;
      ++count;
      EXPECT_TRUE(covered.count(static_cast<DType>(i)))
          << isa_name(isa) << " has an int8 kernel for " << dtype_name(static_cast<DType>(i))
          << ", which no exact test has a reference for";
    }
    EXPECT_EQ(count, isa == Isa::Scalar ? 0 : 11) << isa_name(isa);
  }
}

}  // namespace
}  // namespace pocket::kernels
