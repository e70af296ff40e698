// The int8 matmul kernels for llama.cpp's K-quants (Q4_K, Q5_K, Q6_K;
// src/kernels/gguf_kernels.h) on every level this CPU runs, against the
// integer-exact reference of kquant_reference.h (weights packed from their
// block fields by the test-side encoder, with the kernel's own quantized
// activations): what is left is the kernel's float rounding. A wrong
// sub-block scale, min, fifth bit or bit pair moves the result by far more.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "kernels/act_quant.h"
#include "kernels/dequant.h"
#include "kernels/exact_reference.h"
#include "kernels/kquant_reference.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"
#include "util/thread_pool.h"

namespace pocket::kernels {
namespace {

using test::KBlock;
using test::Rng;

constexpr DType kKTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

using test_kquant::ExactRef;
using test_kquant::exact_reference;
using test_kquant::KWeight;
using test_kquant::max_code;
using test_kquant::rounding_tolerance;

// Element patterns of a row, by r % 5: random, then (extreme) every code at
// its maximum, at its minimum, alternating by element, alternating by
// sub-block of 16; scales and mins at the ends of their ranges too.
KWeight make_weight(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  const int subs = 256 / test::sub_block_size(t), hi = max_code(t);
  return test_kquant::build_kweight(t, rows, cols, [&](int64_t r, int64_t, KBlock& b) {
    const int pattern = static_cast<int>(r % 5);
    b.d = test::random_half(rng, 0.0005f, 0.02f);
    b.dmin = test::random_half(rng, 0.0005f, 0.02f);
    for (int s = 0; s < subs; ++s) {
      if (t == DType::Q6_K) {
        b.scales.push_back(pattern == 0 ? static_cast<int>(rng.next() % 256) - 128 : (s % 2 ? -128 : 127));
      } else {
        b.scales.push_back(pattern == 0 ? static_cast<int>(rng.next() % 64) : 63);
        b.mins.push_back(pattern == 0 ? static_cast<int>(rng.next() % 64) : (s % 2 ? 0 : 63));
      }
    }
    for (int i = 0; i < 256; ++i) {
      int q = static_cast<int>(rng.next() % static_cast<uint64_t>(hi + 1));
      if (pattern == 1) q = hi;
      if (pattern == 2) q = 0;
      if (pattern == 3) q = i % 2 ? hi : 0;
      if (pattern == 4) q = (i / 16) % 2 ? 0 : hi;
      b.codes.push_back(q);
    }
  });
}

// The activation kinds of weight_builders.h, constant magnitude included.
std::vector<float> kquant_x(int n, int64_t cols, uint64_t seed) { return test::varied_activations(n, cols, seed, 4); }

using test_exact::int8_levels;

class MatmulKQuant : public testing::TestWithParam<DType> {};

TEST_P(MatmulKQuant, MatchesIntegerReferenceOnEveryLevel) {
  const DType type = GetParam();
  const auto levels = int8_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no int8 kernel for " << dtype_name(type) << " on this CPU";
  ThreadPool pool(2);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 256}, {10, 512}, {23, 768}}) {
    const KWeight w = make_weight(type, rows, cols, 40 + rows);
    // n = 1 (decode), every token-tile remainder, an odd prefill size, and
    // one past a chunk of 32 tokens (gguf_kernels.h: kGgufTokenChunk).
    for (int n : {1, 2, 3, 4, 5, 7, 13, 37}) {
      const auto x = kquant_x(n, cols, 70 + n + cols);
      for (Isa isa : levels) {
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " rows=" << rows
                                        << " cols=" << cols << " n=" << n);
        const KernelTable& table = kernel_table(isa);
        // The activations as this kernel has them quantized (one scale per
        // super-block of 256: MatmulEntry::act_scale_block).
        ActBlocks a;
        quantize_acts(x.data(), n, cols, cols, a, table.matmul[static_cast<int>(type)].act_scale_block);
        const ExactRef ref = exact_reference(type, w, rows, cols, a);
        std::vector<float> y(static_cast<size_t>(n * rows), NAN), y2(y.size(), NAN);
        matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
        for (int t = 0; t < n; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            const size_t i = static_cast<size_t>(t * rows + r);
            ASSERT_NEAR(y[i], ref.y[i], rounding_tolerance(ref, cols, i))
                << "t=" << t << " r=" << r << " (row pattern " << r % 5 << ", |terms| = " << ref.mag[i] << ")";
          }
        // Two threads split the rows: bitwise the same result.
        matmul_with(table, w.view, x.data(), n, y2.data(), &pool);
        ASSERT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)));
      }
    }
  }
}

// The reference's reading of the fields agrees with the library's decoder
// (dequant_row, what the scalar level and `pocket quantize` use): the dot of
// the decoded values with the dequantized activations, in double. The
// decoded values are exact up to one f32 rounding (dequant_gguf.cpp).
TEST_P(MatmulKQuant, ReferenceAgreesWithDecodedValues) {
  const DType type = GetParam();
  const int64_t rows = 11, cols = 512;
  const KWeight w = make_weight(type, rows, cols, 9);
  const int n = 4;
  const auto x = kquant_x(n, cols, 10);
  ActBlocks a;
  quantize_acts(x.data(), n, cols, cols, a, 256);
  const ExactRef ref = exact_reference(type, w, rows, cols, a);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequant_row(w.view, r, row.data());
    for (int t = 0; t < n; ++t) {
      double y = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double xk = static_cast<double>(a.scales(t)[k / kActBlock]) * a.row(t)[k];
        y += row[static_cast<size_t>(k)] * xk;
        mag += std::fabs(row[static_cast<size_t>(k)] * xk);
      }
      ASSERT_NEAR(ref.y[static_cast<size_t>(t * rows + r)], y, FLT_EPSILON * mag + 1e-30) << "t=" << t << " r=" << r;
    }
  }
}

// The ARM levels share one integer dot per block: plain NEON (widening
// multiplies) and sdot give bit-identical results.
TEST_P(MatmulKQuant, ArmLevelsAgreeBitwise) {
  const DType type = GetParam();
  std::vector<Isa> arm;
  for (Isa isa : int8_levels(type))
    if (isa == Isa::Neon || isa == Isa::Dotprod || isa == Isa::I8mm) arm.push_back(isa);
  if (arm.size() < 2) GTEST_SKIP() << "fewer than two ARM kernel levels on this CPU";
  const int64_t rows = 9, cols = 512;
  const KWeight w = make_weight(type, rows, cols, 21);
  for (int n : {1, 3, 6}) {
    const auto x = kquant_x(n, cols, 22 + n);
    std::vector<float> y0(static_cast<size_t>(n * rows)), y1(y0.size());
    matmul_with(kernel_table(arm[0]), w.view, x.data(), n, y0.data(), nullptr);
    for (size_t i = 1; i < arm.size(); ++i) {
      matmul_with(kernel_table(arm[i]), w.view, x.data(), n, y1.data(), nullptr);
      ASSERT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)))
          << isa_name(arm[0]) << " vs " << isa_name(arm[i]) << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, MatmulKQuant, testing::ValuesIn(kKTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every SIMD level has the K-quant kernels (a level that lost one would run
// these files on the scalar reference, some 30 times slower), and they take
// one activation scale per super-block.
TEST(MatmulKQuant, EverySimdLevelHasThem) {
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    for (DType t : kKTypes) {
      const MatmulEntry& e = kernel_table(isa).matmul[static_cast<int>(t)];
      EXPECT_TRUE(e.int8_acts) << isa_name(isa) << " " << dtype_name(t);
      EXPECT_EQ(e.act_scale_block, 256) << isa_name(isa) << " " << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace pocket::kernels
