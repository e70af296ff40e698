// The int8-activation matmul kernels (MatmulEntry::int8_acts) against an
// integer-exact reference that uses the same quantized activations as the
// kernel (quantize_acts, act_quant.h). Per token t, row r and block b of 32
// columns, with the weight stored as value = scale * code + offset:
//
//   y[t, r] = sum_b  sw[r,b] * dx[t,b] * I[t,r,b]  +  ow[r,b] * dx[t,b] * S[t,b]
//   I = sum_j code[r, j] * qx[t, j]   (exact int32)     S = sum_j qx[t, j]
//
// evaluated in double, so the only difference left is the kernel's float
// rounding. test_matmul.cpp keeps the end-to-end bound against the float
// reference (which must allow the activation quantization error, a bound
// that grows with sum|w|); this file tolerates only rounding, which is what
// catches a 0.1% error in a zero-point correction or a scale.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>

#include "kernels/act_quant.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"
#include "core/pq_format.h"

namespace pocket::kernels {
namespace {

using test::BuiltWeight;
using test::build_weight;
using test::Rng;

// Every weight type this file has an exact reference for; the coverage test
// below fails if some level gains an int8 kernel for a type not listed.
constexpr DType kInt8Types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::PQ4, DType::PQ8};

bool is_pq(DType t) { return t == DType::PQ4 || t == DType::PQ8; }

// A kernel may add up to this much to the stored codes to use an unsigned x
// signed int8 dot and remove bias * sum(x) afterwards (AVX-512 vpdpbusd does
// this for the signed 8-bit types: x86_vec.h kS8Bias). The nibble types are
// already unsigned. It only enlarges the magnitude the rounding is measured
// against, as the kernel's intermediate terms are that large.
int max_code_bias(DType t) { return (t == DType::Q8_0 || t == DType::PQ8) ? 128 : 0; }

// The activations padded as the matmul entry point pads them (whole groups
// for PQ types, whole blocks of 32 otherwise).
int64_t padded_cols(DType t, int64_t cols, int group) {
  const int64_t unit = is_pq(t) ? group : kActBlock;
  return (cols + unit - 1) / unit * unit;
}

struct ExactRef {
  std::vector<double> y;    // n * rows
  std::vector<double> mag;  // n * rows: sum of |terms| the kernel rounds
  int64_t blocks = 0;       // blocks of 32 per row
};

ExactRef exact_reference(const BuiltWeight& w, DType type, int64_t rows, int64_t cols, const ActBlocks& a) {
  ExactRef ref;
  ref.blocks = (cols + kActBlock - 1) / kActBlock;
  ref.y.assign(static_cast<size_t>(a.n * rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  const int bias = max_code_bias(type);
  for (int t = 0; t < a.n; ++t) {
    const int8_t* q = a.row(t);
    for (int64_t k = cols; k < a.kpad; ++k) EXPECT_EQ(q[k], 0) << "padding activation t=" << t << " k=" << k;
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
double rounding_tolerance(const ExactRef& ref, size_t i) {
  return (static_cast<double>(ref.blocks) + 10.0) * FLT_EPSILON * ref.mag[i];
}

std::vector<float> make_x(int n, int64_t cols, uint64_t seed) { return test::varied_activations(n, cols, seed); }

void check_exact(Isa isa, DType type, const BuiltWeight& w, int64_t rows, int64_t cols, int group,
                 const std::vector<float>& x, int n) {
  const KernelTable& table = kernel_table(isa);
  ASSERT_TRUE(table.matmul[static_cast<int>(type)].int8_acts);
  ActBlocks a;
  quantize_acts(x.data(), n, cols, padded_cols(type, cols, group), a);
  const ExactRef ref = exact_reference(w, type, rows, cols, a);
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

// Levels with an int8 kernel for `type` (the others have nothing to check).
std::vector<Isa> int8_levels(DType type) {
  std::vector<Isa> out;
  for (Isa isa : supported_isas())
    if (kernel_table(isa).matmul[static_cast<int>(type)].int8_acts) out.push_back(isa);
  return out;
}

struct Shape {
  int64_t rows, cols;
  int group;
};

class MatmulExactTest : public testing::TestWithParam<DType> {};

TEST_P(MatmulExactTest, MatchesIntegerReferenceOnOddShapes) {
  const DType type = GetParam();
  const auto levels = int8_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no int8 kernel for " << dtype_name(type) << " on this CPU";
  // Rows: 1, below / above / not a multiple of the 16-row tile; cols: one
  // block up to 12 blocks, several groups, and (PQ) a partial last group.
  std::vector<Shape> shapes;
  if (is_pq(type))
    shapes = {{1, 32, 32}, {16, 256, 128}, {35, 320, 64}, {50, 200, 64}, {17, 384, 128}, {3, 70, 32}};
  else
    shapes = {{1, 32, 0}, {17, 96, 0}, {35, 320, 0}, {50, 384, 0}};
  for (const Shape& s : shapes) {
    auto w = build_weight(type, s.rows, s.cols, s.group, 500 + s.rows * 3 + s.cols);
    // n = 1 (decode), then every token-tile remainder and odd prefill sizes.
    for (int n : {1, 2, 3, 4, 5, 7, 13}) {
      auto x = make_x(n, s.cols, 900 + n + s.cols);
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
  const bool five = type == DType::Q5_0 || type == DType::Q5_1;
  const int lo = nibble || five ? 0 : (type == DType::Q8_0 ? -128 : -127), hi = nibble ? 15 : five ? 31 : 127;
  const int64_t rows = 37, cols = 256;
  const int n = 5;
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
    auto x = make_x(n, cols, 4);
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
// K-quants) has a reference for, and every SIMD level has all ten.
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
    EXPECT_EQ(count, isa == Isa::Scalar ? 0 : 10) << isa_name(isa);
  }
}

}  // namespace
}  // namespace pocket::kernels
