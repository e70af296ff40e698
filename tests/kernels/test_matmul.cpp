// matmul and dequant_row for every weight type and every ISA level this CPU
// runs, against a double-precision reference built from the encoded values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket::kernels {
namespace {

using test::build_weight;
using test::Rng;

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::PQ4, DType::PQ5, DType::PQ8};

std::vector<float> random_x(int n, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (auto& v : x) v = rng.uniform(-2.0f, 2.0f);
  return x;
}

// Bound on |y - Y| where y uses activations quantized to int8 blocks of 32
// (error <= d/2 per element, d = max|x|/127 of the block) plus float
// rounding, for which 2e-5 * sum|w x| is generous at these lengths.
double tolerance(const std::vector<float>& w, const std::vector<float>& x, int64_t cols, int64_t r, int t,
                 bool int8_acts) {
  double bound = 0, mag = 0;
  for (int64_t b = 0; b < cols; b += 32) {
    double amax = 0, wsum = 0;
    for (int64_t k = b; k < std::min(cols, b + 32); ++k) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[t * cols + k])));
      wsum += std::fabs(w[r * cols + k]);
      mag += std::fabs(static_cast<double>(w[r * cols + k]) * x[t * cols + k]);
    }
    bound += amax / 127.0 / 2.0 * wsum;
  }
  return (int8_acts ? bound : 0.0) + 2e-5 * mag + 1e-6;
}

using Shape = test::WeightShape;

void check_matmul(Isa isa, DType type, Shape s, int n) {
  SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " rows=" << s.rows
                                  << " cols=" << s.cols << " group=" << s.group << " n=" << n);
  auto w = build_weight(type, s.rows, s.cols, s.group, 1000 + s.rows * 7 + s.cols);
  auto x = random_x(n, s.cols, 77 + n);
  auto ref = test::reference_matmul(w.values, s.rows, s.cols, x, n);
  const KernelTable& table = kernel_table(isa);
  const bool int8_acts = table.matmul[static_cast<int>(type)].int8_acts;
  std::vector<float> y1(static_cast<size_t>(n * s.rows)), y2(y1.size(), -1.0f);
  matmul_with(table, w.view, x.data(), n, y1.data(), nullptr);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < s.rows; ++r) {
      double tol = tolerance(w.values, x, s.cols, r, t, int8_acts);
      ASSERT_NEAR(y1[t * s.rows + r], ref[t * s.rows + r], tol) << "t=" << t << " r=" << r;
    }
  // Same level, two threads: bitwise identical.
  ThreadPool pool(2);
  matmul_with(table, w.view, x.data(), n, y2.data(), &pool);
  ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
}

class MatmulTest : public testing::TestWithParam<DType> {};

TEST_P(MatmulTest, EveryIsaMatchesReferenceOnOddShapes) {
  const DType type = GetParam();
  const bool blocked = type == DType::Q8_0 || type == DType::Q4_0;
  const bool pq = type == DType::PQ4 || type == DType::PQ5 || type == DType::PQ8;
  std::vector<Shape> shapes = {{1, 32, 32}, {17, 64, 32}, {40, 96, 32}};
  if (!blocked) shapes.push_back({33, 200, 64});  // cols not a multiple of 32 or of the group
  if (pq) {
    shapes.push_back({16, 256, 128});
    shapes.push_back({35, 300, 128});
    shapes.push_back({3, 70, 64});
  }
  for (Isa isa : supported_isas())
    for (const Shape& s : shapes)
      // n covers every token tile and remainder: 1 (decode), 2..5 (the
      // ARM kernels tile by 2 and 4 tokens), 17 and 33 (many tiles + one).
      for (int n : {1, 2, 3, 4, 5, 7, 17, 33}) check_matmul(isa, type, s, n);
}

TEST_P(MatmulTest, DequantRowMatchesEncodedValues) {
  const DType type = GetParam();
  const int64_t rows = 19, cols = (type == DType::Q8_0 || type == DType::Q4_0) ? 96 : 100;
  auto w = build_weight(type, rows, cols, 64, 5);
  std::vector<float> out(cols);
  for (int64_t r = 0; r < rows; ++r) {
    dequant_row(w.view, r, out.data());
    for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(out[k], w.values[r * cols + k]) << "r=" << r << " k=" << k;
  }
  EXPECT_THROW(dequant_row(w.view, rows, out.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest, testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The ARM PQ kernels (plain NEON widening multiplies, dotprod, i8mm) do
// the same float operations per output on exact integer dots, so they must
// agree bit for bit with each other; this is stronger than the tolerance
// against the reference above. Runs only where two such levels exist.
TEST(Matmul, ArmPqLevelsAgreeBitwise) {
  std::vector<Isa> arm;
  for (Isa i : supported_isas())
    if (i == Isa::Neon || i == Isa::Dotprod || i == Isa::I8mm) arm.push_back(i);
  if (arm.size() < 2) GTEST_SKIP() << "fewer than two ARM kernel levels on this CPU";
  const Shape shapes[] = {{35, 300, 128}, {17, 64, 32}, {48, 200, 64}};
  for (DType type : {DType::PQ4, DType::PQ5, DType::PQ8})
    for (const Shape& s : shapes)
      for (int n : {1, 2, 3, 4, 5, 17, 33}) {
        SCOPED_TRACE(testing::Message() << dtype_name(type) << " rows=" << s.rows << " cols=" << s.cols
                                        << " group=" << s.group << " n=" << n);
        auto w = build_weight(type, s.rows, s.cols, s.group, 31 + s.rows);
        auto x = random_x(n, s.cols, 5 + n);
        std::vector<float> y0(static_cast<size_t>(n * s.rows)), y1(y0.size());
        matmul_with(kernel_table(arm[0]), w.view, x.data(), n, y0.data(), nullptr);
        for (size_t l = 1; l < arm.size(); ++l) {
          SCOPED_TRACE(testing::Message() << isa_name(arm[l]) << " vs " << isa_name(arm[0]));
          std::fill(y1.begin(), y1.end(), -1.0f);
          matmul_with(kernel_table(arm[l]), w.view, x.data(), n, y1.data(), nullptr);
          ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)));
        }
      }
}

// Largest integer partial sums: every weight code at its extreme and every
// activation quantized to +-127 (constant rows). Kernels that accumulate in
// int16 lanes (plain NEON) would overflow here first if their bound were
// wrong; the result is checked against the double reference.
TEST(Matmul, PqExtremeCodesMatchReference) {
  const int64_t rows = 20, cols = 256;
  for (DType type : {DType::PQ4, DType::PQ5, DType::PQ8})
    for (int group : {32, 128})
      for (int sign : {1, -1}) {
        const bool q4 = type != DType::PQ8;
        const float qmax = type == DType::PQ5 ? 31.0f : 15.0f;
        // Codes: 15 for PQ4, 31 for PQ5 (all bits set: values s * qmax + m);
        // +-127 for PQ8 times the activations' sign, so every product has
        // the same sign.
        auto w = build_weight(type, rows, cols, group, 9);
        const int64_t groups = cols / group;
        const int64_t gblock = 16 * (q4 ? group / 2 + 4 + (type == DType::PQ5 ? group / 8 : 0) : group + 2);
        const int hdr = q4 ? 64 : 32;
        for (int64_t tile = 0; tile < (rows + 15) / 16; ++tile)
          for (int64_t g = 0; g < groups; ++g) {
            uint8_t* blk = w.bytes.data() + (tile * groups + g) * gblock;
            std::memset(blk + hdr, q4 ? 0xff : static_cast<uint8_t>(static_cast<int8_t>(127 * sign)),
                        static_cast<size_t>(gblock - hdr));
            for (int64_t rr = 0; rr < 16 && tile * 16 + rr < rows; ++rr) {
              const float s = f16_to_f32(static_cast<uint16_t>(blk[2 * rr] | blk[2 * rr + 1] << 8));
              const float m = q4 ? f16_to_f32(static_cast<uint16_t>(blk[32 + 2 * rr] | blk[33 + 2 * rr] << 8)) : 0.0f;
              for (int64_t k = g * group; k < (g + 1) * group; ++k)
                w.values[(tile * 16 + rr) * cols + k] = q4 ? s * qmax + m : s * 127.0f * sign;
            }
          }
        const int n = 5;
        std::vector<float> x(static_cast<size_t>(n * cols));
        for (int t = 0; t < n; ++t)
          for (int64_t k = 0; k < cols; ++k) x[t * cols + k] = sign * (0.5f + 0.25f * t);
        auto ref = test::reference_matmul(w.values, rows, cols, x, n);
        for (Isa isa : supported_isas()) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " group=" << group
                                          << " sign=" << sign);
          const KernelTable& table = kernel_table(isa);
          const bool int8_acts = table.matmul[static_cast<int>(type)].int8_acts;
          std::vector<float> y(static_cast<size_t>(n * rows));
          matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
          for (int t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r)
              ASSERT_NEAR(y[t * rows + r], ref[t * rows + r], tolerance(w.values, x, cols, r, t, int8_acts))
                  << "t=" << t << " r=" << r;
        }
      }
}

TEST(Matmul, RejectsTruncatedWeights) {
  auto w = build_weight(DType::PQ4, 20, 64, 32, 1);
  w.view.nbytes -= 1;
  std::vector<float> x(64, 1.0f), y(20);
  EXPECT_THROW(matmul(w.view, x.data(), 1, y.data(), nullptr), Error);
  w.view.nbytes += 1;
  w.view.group = 48;
  EXPECT_THROW(matmul(w.view, x.data(), 1, y.data(), nullptr), Error);
}

TEST(Isa, ActiveIsaIsSupported) {
  std::string levels;
  for (Isa i : supported_isas()) levels += std::string(" ") + isa_name(i);
  std::printf("supported ISA levels:%s; active: %s\n", levels.c_str(), active_isa());
  bool found = false;
  for (Isa i : supported_isas()) found |= std::string(isa_name(i)) == active_isa();
  EXPECT_TRUE(found) << active_isa();
}

// scripts/test.sh runs the kernel tests under an emulated CPU whose best level
// it knows (qemu-x86_64 -cpu max has AVX2 but no AVX-512) and says so here, so
// a detection that over-reports cannot pass just because nothing trapped.
TEST(Isa, DetectsTheLevelTheCpuHas) {
  const char* expect = std::getenv("POCKET_EXPECT_ISA");
  if (expect == nullptr || *expect == '\0') GTEST_SKIP() << "POCKET_EXPECT_ISA not set";
  EXPECT_STREQ(isa_name(supported_isas().back()), expect);
  EXPECT_STREQ(active_isa(), expect);
}

}  // namespace
}  // namespace pocket::kernels
