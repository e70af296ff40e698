// The int8 matmul kernels for llama.cpp's K-quants (Q4_K, Q5_K, Q6_K;
// src/kernels/gguf_kernels.h) on every level this CPU runs, against an
// integer-exact reference built from the block fields (packed by the
// test-side encoder tests/common/gguf_kquant_pack.h, not the library's).
// With the kernel's own quantized activations (quantize_acts with the
// entry's act_scale_block: one scale dx per 256 columns for these types),
// per token t, row r and sub-block s (32 elements for Q4_K/Q5_K, 16 for
// Q6_K) inside activation block b:
//
//   y[t, r] = sum_s  (d * sc[s]) * dx[t,b] * I[s]  -  (dmin * m[s]) * dx[t,b] * S[s]
//   I = sum code * qx (Q6_K: code - 32)   S = sum qx   (exact integers)
//
// in double, so what is left is the kernel's float rounding, bounded as in
// test_matmul_exact.cpp. A wrong sub-block scale, min, fifth bit or bit
// pair moves the result by far more than that.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "common/gguf_kquant_pack.h"
#include "kernels/act_quant.h"
#include "kernels/dequant.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"
#include "util/thread_pool.h"

namespace pocket::kernels {
namespace {

using test::KBlock;
using test::Rng;

constexpr DType kKTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

int max_code(DType t) { return t == DType::Q4_K ? 15 : t == DType::Q5_K ? 31 : 63; }

// Element patterns of a row, by r % 5: random, then (extreme) every code at
// its maximum, at its minimum, alternating by element, alternating by
// sub-block of 16; scales and mins at the ends of their ranges too.
struct KWeight {
  std::vector<uint8_t> bytes;
  std::vector<KBlock> blocks;  // rows * cols / 256, row-major
  TensorView view;
};

KWeight make_weight(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  KWeight w;
  const int64_t nsb = cols / 256;
  const int subs = 256 / test::sub_block_size(t), hi = max_code(t);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < nsb; ++sb) {
      KBlock b;
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
      const auto packed = test::pack_block(t, b);
      w.bytes.insert(w.bytes.end(), packed.begin(), packed.end());
      w.blocks.push_back(std::move(b));
    }
  w.view.name = "test";
  w.view.type = t;
  w.view.shape = {rows, cols};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  return w;
}

struct ExactRef {
  std::vector<double> y, mag;  // n * rows; mag: sum of |terms| the kernel rounds
};

ExactRef exact_reference(DType t, const KWeight& w, int64_t rows, int64_t cols, const ActBlocks& a) {
  const int sub = test::sub_block_size(t);
  const int64_t nsb = cols / 256;
  ExactRef ref;
  ref.y.assign(static_cast<size_t>(a.n * rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  for (int tok = 0; tok < a.n; ++tok) {
    const int8_t* q = a.row(tok);
    for (int64_t r = 0; r < rows; ++r) {
      double y = 0, mag = 0;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const KBlock& b = w.blocks[static_cast<size_t>(r * nsb + sb)];
        const double d = test::rounded_half(b.d), dmin = test::rounded_half(b.dmin);
        for (int s = 0; s < 256 / sub; ++s) {
          int64_t dot = 0, sum = 0, absdot = 0;
          for (int i = s * sub; i < (s + 1) * sub; ++i) {
            const int code = b.codes[static_cast<size_t>(i)] - (t == DType::Q6_K ? 32 : 0);
            const int x = q[sb * 256 + i];
            dot += code * x;
            sum += x;
            absdot += std::abs(code) * std::abs(x);
          }
          const double dx = a.scales(tok)[(sb * 256 + s * sub) / kActBlock];
          const double scale = d * b.scales[static_cast<size_t>(s)];
          const double offset = t == DType::Q6_K ? 0.0 : dmin * b.mins[static_cast<size_t>(s)];
          y += scale * dx * static_cast<double>(dot) - offset * dx * static_cast<double>(sum);
          mag += std::fabs(scale * dx) * static_cast<double>(absdot) + offset * std::fabs(dx * static_cast<double>(sum));
        }
      }
      ref.y[static_cast<size_t>(tok * rows + r)] = y;
      ref.mag[static_cast<size_t>(tok * rows + r)] = mag;
    }
  }
  return ref;
}

// As test_matmul_exact.cpp: at most one accumulation step per activation
// block plus a fixed number of other roundings, each FLT_EPSILON / 2 of a
// partial sum below `mag`, doubled.
double rounding_tolerance(const ExactRef& ref, int64_t cols, size_t i) {
  return (static_cast<double>(cols / kActBlock) + 10.0) * FLT_EPSILON * ref.mag[i];
}

// The activation kinds of weight_builders.h, constant magnitude included.
std::vector<float> make_x(int n, int64_t cols, uint64_t seed) { return test::varied_activations(n, cols, seed, 4); }

std::vector<Isa> int8_levels(DType t) {
  std::vector<Isa> out;
  for (Isa isa : supported_isas())
    if (kernel_table(isa).matmul[static_cast<int>(t)].int8_acts) out.push_back(isa);
  return out;
}

class MatmulKQuant : public testing::TestWithParam<DType> {};

TEST_P(MatmulKQuant, MatchesIntegerReferenceOnEveryLevel) {
  const DType type = GetParam();
  const auto levels = int8_levels(type);
  if (levels.empty()) GTEST_SKIP() << "no int8 kernel for " << dtype_name(type) << " on this CPU";
  ThreadPool pool(2);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 256}, {10, 512}, {23, 768}}) {
    const KWeight w = make_weight(type, rows, cols, 40 + rows);
    // n = 1 (decode), every token-tile remainder, an odd prefill size.
    for (int n : {1, 2, 3, 4, 5, 7, 13}) {
      const auto x = make_x(n, cols, 70 + n + cols);
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
  const auto x = make_x(n, cols, 10);
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
    const auto x = make_x(n, cols, 22 + n);
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
