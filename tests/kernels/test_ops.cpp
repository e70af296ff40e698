// Element-wise kernels: the scalar reference against direct double-precision
// formulas, every other ISA level against the scalar reference. Attention
// has its own file (test_attention.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/test_util.h"
#include "kernels/table.h"
#include "util/half.h"

namespace pocket::kernels {
namespace {

using test::Rng;

std::vector<float> random_vec(int n, uint64_t seed, float lo = -3.0f, float hi = 3.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Relative tolerance for SIMD vs scalar: float reassociation and the
// polynomial exp (~1e-6 relative); stated per test.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel, float abs) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], abs + rel * std::fabs(b[i])) << "i=" << i;
}

const KernelTable& ref() { return kernel_table(Isa::Scalar); }

TEST(Ops, ScalarMatchesFormulas) {
  auto x = random_vec(37, 1), w = random_vec(37, 2);
  std::vector<float> out(37);
  ref().rmsnorm(out.data(), x.data(), w.data(), 37, 1e-5f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  for (int i = 0; i < 37; ++i) EXPECT_NEAR(out[i], x[i] / std::sqrt(ss / 37 + 1e-5) * w[i], 1e-5);

  auto s = x;
  ref().softmax(s.data(), 37);
  double z = 0;
  for (float v : x) z += std::exp(double(v));
  for (int i = 0; i < 37; ++i) EXPECT_NEAR(s[i], std::exp(double(x[i])) / z, 1e-6);

  auto g = x;
  ref().swiglu(g.data(), w.data(), 37);
  for (int i = 0; i < 37; ++i) EXPECT_NEAR(g[i], x[i] / (1 + std::exp(-double(x[i]))) * w[i], 1e-5);

  // RoPE by hand for one head of 4: halves pairs (0,2),(1,3); adjacent (0,1),(2,3).
  const float inv_freq[2] = {1.0f, 0.01f};
  for (RopeStyle st : {RopeStyle::Halves, RopeStyle::Adjacent}) {
    float v[4] = {1, 2, 3, 4};
    ref().rope(v, 1, 4, 3, st, inv_freq);
    int a0 = 0, b0 = st == RopeStyle::Halves ? 2 : 1, a1 = st == RopeStyle::Halves ? 1 : 2, b1 = 3;
    float in[4] = {1, 2, 3, 4};
    EXPECT_NEAR(v[a0], in[a0] * std::cos(3.0) - in[b0] * std::sin(3.0), 1e-5);
    EXPECT_NEAR(v[b0], in[a0] * std::sin(3.0) + in[b0] * std::cos(3.0), 1e-5);
    EXPECT_NEAR(v[a1], in[a1] * std::cos(0.03) - in[b1] * std::sin(0.03), 1e-5);
    EXPECT_NEAR(v[b1], in[a1] * std::sin(0.03) + in[b1] * std::cos(0.03), 1e-5);
  }
}

TEST(Ops, EveryIsaMatchesScalar) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const KernelTable& t = kernel_table(isa);
    // Odd sizes hit the 4- and 8-wide loops and their scalar tails.
    for (int n : {1, 3, 4, 5, 7, 8, 17, 33, 1024}) {
      SCOPED_TRACE(n);
      auto x = random_vec(n, 10 + n), w = random_vec(n, 20 + n);
      std::vector<float> a(n), b(n);
      t.rmsnorm(a.data(), x.data(), w.data(), n, 1e-6f);
      ref().rmsnorm(b.data(), x.data(), w.data(), n, 1e-6f);
      expect_close(a, b, 1e-5f, 1e-6f);

      auto big = random_vec(n, 30 + n, -40.0f, 40.0f);  // wide range: exp under/overflow paths
      a = big, b = big;
      t.softmax(a.data(), n);
      ref().softmax(b.data(), n);
      expect_close(a, b, 1e-5f, 1e-9f);

      a = big, b = big;
      t.swiglu(a.data(), w.data(), n);
      ref().swiglu(b.data(), w.data(), n);
      expect_close(a, b, 1e-5f, 1e-6f);

      std::vector<uint16_t> h1(n), h2(n);
      t.f32_to_f16_row(big.data(), h1.data(), n);
      ref().f32_to_f16_row(big.data(), h2.data(), n);
      EXPECT_EQ(h1, h2);  // both round to nearest even: bitwise
      t.f16_to_f32_row(h1.data(), a.data(), n);
      ref().f16_to_f32_row(h1.data(), b.data(), n);
      EXPECT_EQ(a, b);
    }
    // head_dim 12: a 4-wide block plus a scalar tail; 8/64/128 common sizes.
    for (int hd : {4, 8, 12, 64, 128}) {
      for (RopeStyle st : {RopeStyle::Halves, RopeStyle::Adjacent}) {
        SCOPED_TRACE(testing::Message() << "rope hd=" << hd << " style=" << static_cast<int>(st));
        auto x = random_vec(3 * hd, 40 + hd), y = x;
        std::vector<float> inv(hd / 2);
        for (int i = 0; i < hd / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / hd);
        t.rope(x.data(), 3, hd, 517, st, inv.data());
        ref().rope(y.data(), 3, hd, 517, st, inv.data());
        expect_close(x, y, 1e-5f, 1e-5f);
      }
    }
  }
}

// fp16 conversions at the edges of the format: subnormals, the rounding
// boundary to infinity, ties to even, signed zeros and infinities. Every
// level must match the scalar reference bitwise; NaN must stay NaN (only
// the payload may differ).
TEST(Ops, F16RowsMatchScalarOnSpecialValues) {
  const float inf = INFINITY;
  std::vector<float> x = {
      0.0f, -0.0f, 1.0f, -2.5f, 1234.5678f, 0.33333334f, -7.77e-3f,
      65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e6f, inf, -inf,  // largest half, rounding to inf
      6.1035156e-05f, 6.0e-05f, 5.9604645e-08f, -1.0e-07f, 1e-10f,  // smallest normal, subnormals, underflow
      2.98e-08f, 2.9802322e-08f, 3.0e-08f,                           // around half the smallest subnormal (a tie)
      1.00048828125f, 1.00146484375f};                               // ties between normals: to even
  for (int i = 0; i < 9; ++i) x.push_back(static_cast<float>(i) * 0.1f - 0.4f);  // length 33: 4 x 8 + tail
  const int64_t n = static_cast<int64_t>(x.size());
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const KernelTable& t = kernel_table(isa);
    std::vector<uint16_t> h1(n), h2(n);
    t.f32_to_f16_row(x.data(), h1.data(), n);
    ref().f32_to_f16_row(x.data(), h2.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(h1[i], h2[i]) << "x=" << x[i];

    // Every finite and infinite half bit pattern back to float.
    std::vector<uint16_t> all;
    for (uint32_t b = 0; b < 0x10000; ++b)
      if ((b & 0x7c00) != 0x7c00 || (b & 0x3ff) == 0) all.push_back(static_cast<uint16_t>(b));
    all.push_back(0x7e00);  // a NaN, last
    std::vector<float> f1(all.size()), f2(all.size());
    t.f16_to_f32_row(all.data(), f1.data(), static_cast<int64_t>(all.size()));
    ref().f16_to_f32_row(all.data(), f2.data(), static_cast<int64_t>(all.size()));
    ASSERT_EQ(0, std::memcmp(f1.data(), f2.data(), (all.size() - 1) * sizeof(float)));
    EXPECT_TRUE(std::isnan(f1.back()));

    float nan_in[3] = {NAN, 1.0f, -NAN};
    uint16_t nan_out[3];
    t.f32_to_f16_row(nan_in, nan_out, 3);
    EXPECT_TRUE(std::isnan(f16_to_f32(nan_out[0])));
    EXPECT_EQ(nan_out[1], 0x3c00);
    EXPECT_TRUE(std::isnan(f16_to_f32(nan_out[2])));
  }
}

}  // namespace
}  // namespace pocket::kernels
