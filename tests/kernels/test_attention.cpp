// Multi-query attention (attention_heads): the scalar reference against a
// direct double-precision formula with a causal length per query, and every
// other ISA level against the scalar reference on odd shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/test_util.h"
#include "kernels/table.h"
#include "util/half.h"

namespace pocket::kernels {
namespace {

using test::Rng;

struct Case {
  int head_dim, n_q, base_ctx;
};

// Fills K/V for max_ctx positions and n_q queries whose n_ctx grows by one
// every `per_token` queries, as the queries of consecutive tokens do.
struct Inputs {
  std::vector<uint16_t> k, v;
  std::vector<std::vector<float>> q, out;
  AttentionQueries qs;
  int max_ctx = 0;

  Inputs(const Case& c, int per_token, uint64_t seed) {
    Rng rng(seed);
    max_ctx = c.base_ctx + (c.n_q - 1) / per_token;
    k.resize(static_cast<size_t>(max_ctx) * c.head_dim);
    v.resize(k.size());
    for (auto& e : k) e = f32_to_f16(rng.uniform(-2.0f, 2.0f));
    for (auto& e : v) e = f32_to_f16(rng.uniform(-1.0f, 1.0f));
    q.resize(c.n_q);
    out.assign(c.n_q, std::vector<float>(c.head_dim, -7.0f));  // garbage: the kernel must overwrite
    qs.n = c.n_q;
    for (int j = 0; j < c.n_q; ++j) {
      q[j].resize(c.head_dim);
      for (auto& e : q[j]) e = rng.uniform(-2.0f, 2.0f);
      qs.q[j] = q[j].data();
      qs.out[j] = out[j].data();
      qs.n_ctx[j] = c.base_ctx + j / per_token;
    }
  }
};

TEST(Attention, ScalarMatchesFormulaWithCausalLengths) {
  const Case c{24, 5, 7};
  Inputs in(c, 2, 1);
  std::vector<float> scratch(static_cast<size_t>(c.n_q) * in.max_ctx);
  const float scale = 0.2f;
  kernel_table(Isa::Scalar).attention_heads(in.qs, in.k.data(), in.v.data(), c.head_dim, scale, scratch.data());
  for (int j = 0; j < c.n_q; ++j) {
    const int n = in.qs.n_ctx[j];
    std::vector<double> p(n);
    double mx = -1e300, z = 0;
    for (int t = 0; t < n; ++t) {
      double dot = 0;
      for (int d = 0; d < c.head_dim; ++d) dot += double(in.q[j][d]) * f16_to_f32(in.k[t * c.head_dim + d]);
      p[t] = dot * scale;
      mx = std::max(mx, p[t]);
    }
    for (auto& e : p) z += (e = std::exp(e - mx));
    for (int d = 0; d < c.head_dim; ++d) {
      double o = 0;
      for (int t = 0; t < n; ++t) o += p[t] / z * f16_to_f32(in.v[t * c.head_dim + d]);
      EXPECT_NEAR(in.out[j][d], o, 1e-5) << "query " << j << " column " << d;
    }
  }
}

// Every level against the scalar twin on `cases`: run(table, inputs,
// scratch) calls one table's kernel. Tolerance: float reassociation over
// head_dim and n_ctx terms plus the polynomial exp, relative 2e-5 of the
// output scale (values are O(1)). `windows` gives some queries a sliding
// window.
template <class Run>
void expect_every_isa_matches_scalar(const std::vector<Case>& cases, uint64_t seed, bool windows, Run run) {
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    for (const Case& c : cases) {
      for (int per_token : {1, 2}) {
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " head_dim " << c.head_dim << " n_q " << c.n_q << " base "
                                        << c.base_ctx << " per_token " << per_token);
        Inputs a(c, per_token, seed + c.head_dim + c.n_q), b(c, per_token, seed + c.head_dim + c.n_q);
        if (windows)
          for (int j = 0; j < c.n_q; ++j) a.qs.first[j] = b.qs.first[j] = (j * 5) % c.base_ctx;
        std::vector<float> s1(static_cast<size_t>(c.n_q) * a.max_ctx), s2(s1.size());
        run(kernel_table(isa), a, s1.data());
        run(kernel_table(Isa::Scalar), b, s2.data());
        for (int j = 0; j < c.n_q; ++j)
          for (int d = 0; d < c.head_dim; ++d)
            ASSERT_NEAR(a.out[j][d], b.out[j][d], 2e-5f * (1.0f + std::fabs(b.out[j][d])))
                << "query " << j << " column " << d;
      }
    }
  }
}

TEST(Attention, EveryIsaMatchesScalar) {
  const std::vector<Case> cases = {
      {128, 2, 1},   {128, 2, 512}, {128, 16, 97}, {128, 1, 65}, {128, 3, 64}, {64, 8, 130}, {24, 5, 9},
      {8, 2, 3},     {40, 7, 200},  {4, 3, 11},    {16, 16, 1},  {128, 4, 63},
  };
  expect_every_isa_matches_scalar(cases, 10, false, [](const KernelTable& t, Inputs& in, float* scratch) {
    t.attention_heads(in.qs, in.k.data(), in.v.data(), static_cast<int>(in.q[0].size()), 0.09f, scratch);
  });
}

// --kv q8 / q4: the same inputs as quantized rows with a scale each. E is
// the stored element type, kBits the bits per element.
template <class E, int kBits>
struct QuantInputs {
  std::vector<E> k, v;
  std::vector<float> ks, vs;
  int head_dim;
  QuantInputs(const Inputs& in, int hd) : head_dim(hd) {
    const size_t rows = in.k.size() / hd, row_elems = static_cast<size_t>(hd) * kBits / 8;
    k.resize(rows * row_elems), v.resize(rows * row_elems), ks.resize(rows), vs.resize(rows);
    std::vector<float> row(hd);
    for (size_t t = 0; t < rows; ++t) {
      for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(in.k[t * hd + d]);
      quantize(row.data(), &k[t * row_elems], &ks[t], hd);
      for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(in.v[t * hd + d]);
      quantize(row.data(), &v[t * row_elems], &vs[t], hd);
    }
  }
  static void quantize(const float* x, int8_t* y, float* s, int n) { quantize_row_q8(x, y, s, n); }
  static void quantize(const float* x, uint8_t* y, float* s, int n) { quantize_row_q4(x, y, s, n); }
  // The value element d of key (kv 0) or value (kv 1) row t stands for.
  double value(int kv, int t, int d) const {
    const std::vector<E>& q = kv == 0 ? k : v;
    const float s = (kv == 0 ? ks : vs)[t];
    if constexpr (kBits == 8)
      return double(q[static_cast<size_t>(t) * head_dim + d]) * s;
    else
      return double(q4_code(&q[static_cast<size_t>(t) * head_dim / 2], d, head_dim)) * s;
  }
  auto krows() const { return Rows{k.data(), ks.data()}; }
  auto vrows() const { return Rows{v.data(), vs.data()}; }
  using Rows = std::conditional_t<kBits == 8, Q8Rows, Q4Rows>;
};
using Q8Inputs = QuantInputs<int8_t, 8>;
using Q4Inputs = QuantInputs<uint8_t, 4>;

TEST(Attention, QuantizeRowQ8RoundsToTheNearestStep) {
  Rng rng(3);
  for (int n : {1, 8, 24, 128}) {
    std::vector<float> x(n);
    for (auto& e : x) e = rng.uniform(-3.0f, 3.0f);
    x[n / 2] = -4.0f;  // the largest magnitude maps to -127
    std::vector<int8_t> y(n);
    float scale = 0;
    quantize_row_q8(x.data(), y.data(), &scale, n);
    EXPECT_FLOAT_EQ(scale, 4.0f / 127.0f);
    EXPECT_EQ(y[n / 2], -127);
    for (int i = 0; i < n; ++i) EXPECT_LE(std::fabs(y[i] * scale - x[i]), scale * 0.5f + 1e-6f) << i;
  }
  std::vector<float> zero(16, 0.0f);
  std::vector<int8_t> y(16, 5);
  float scale = 1;
  quantize_row_q8(zero.data(), y.data(), &scale, 16);
  EXPECT_EQ(scale, 0.0f);
  for (int8_t e : y) EXPECT_EQ(e, 0);
}

// The scalar twin of a quantized cache against the formula over the values
// the rows stand for (QInputs::value), some queries with a sliding window.
// With a q8 cache the query takes part as its own int8 row stands for it
// (kernels.h), so the formula uses that too.
template <class QInputs, class Run>
void expect_scalar_quantized_matches_formula(Run run) {
  const Case c{24, 6, 9};
  Inputs in(c, 2, 2);
  for (int j = 0; j < c.n_q; ++j) in.qs.first[j] = j % 3;  // a sliding window on some queries
  QInputs rows(in, c.head_dim);
  std::vector<float> scratch(static_cast<size_t>(c.n_q) * in.max_ctx);
  const float scale = 0.2f;
  run(in.qs, rows, c.head_dim, scale, scratch.data());
  for (int j = 0; j < c.n_q; ++j) {
    const int a = in.qs.first[j], n = in.qs.n_ctx[j];
    std::vector<double> p(n);
    double mx = -1e300, z = 0;
    std::vector<double> q(in.q[j].begin(), in.q[j].end());
    if constexpr (std::is_same_v<QInputs, Q8Inputs>) {
      std::vector<int8_t> code(c.head_dim);
      float q_scale;
      quantize_row_q8(in.q[j].data(), code.data(), &q_scale, c.head_dim);
      for (int d = 0; d < c.head_dim; ++d) q[d] = double(code[d]) * q_scale;
    }
    for (int t = a; t < n; ++t) {
      double dot = 0;
      for (int d = 0; d < c.head_dim; ++d) dot += q[d] * rows.value(0, t, d);
      p[t] = dot * scale;
      mx = std::max(mx, p[t]);
    }
    for (int t = a; t < n; ++t) z += (p[t] = std::exp(p[t] - mx));
    for (int d = 0; d < c.head_dim; ++d) {
      double o = 0;
      for (int t = a; t < n; ++t) o += p[t] / z * rows.value(1, t, d);
      EXPECT_NEAR(in.out[j][d], o, 1e-5) << "query " << j << " column " << d;
    }
  }
}

TEST(Attention, ScalarQ8MatchesFormulaWithWindows) {
  expect_scalar_quantized_matches_formula<Q8Inputs>([](AttentionQueries& qs, const Q8Inputs& r, int hd, float scale,
                                                       float* scratch) {
    kernel_table(Isa::Scalar).attention_heads_q8(qs, r.krows(), r.vrows(), hd, scale, scratch);
  });
}

TEST(Attention, ScalarQ4MatchesFormulaWithWindows) {
  expect_scalar_quantized_matches_formula<Q4Inputs>([](AttentionQueries& qs, const Q4Inputs& r, int hd, float scale,
                                                       float* scratch) {
    kernel_table(Isa::Scalar).attention_heads_q4(qs, r.krows(), r.vrows(), hd, scale, scratch);
  });
}

// The same tolerance as for fp16 rows (the int8 values convert exactly).
TEST(Attention, EveryIsaMatchesScalarQ8) {
  const std::vector<Case> cases = {{128, 2, 1}, {128, 2, 512}, {128, 16, 97}, {64, 8, 130}, {24, 5, 9},
                                   {8, 2, 3},   {40, 7, 200},  {4, 3, 11},   {128, 4, 63}};
  expect_every_isa_matches_scalar(cases, 20, true, [](const KernelTable& t, Inputs& in, float* scratch) {
    const int hd = static_cast<int>(in.q[0].size());
    Q8Inputs q8(in, hd);
    t.attention_heads_q8(in.qs, q8.krows(), q8.vrows(), hd, 0.09f, scratch);
  });
}

TEST(Attention, QuantizeRowQ4RoundsToTheNearestStep) {
  Rng rng(4);
  for (int n : {2, 8, 24, 32, 40, 128}) {
    std::vector<float> x(n);
    for (auto& e : x) e = rng.uniform(-3.0f, 3.0f);
    x[n / 2] = -3.5f;  // the largest magnitude maps to code -7
    std::vector<uint8_t> y(n / 2, 0xAA);
    float scale = 0;
    quantize_row_q4(x.data(), y.data(), &scale, n);
    EXPECT_FLOAT_EQ(scale, 3.5f / 7.0f);
    EXPECT_EQ(q4_code(y.data(), n / 2, n), -7);
    for (int i = 0; i < n; ++i) {
      const int c = q4_code(y.data(), i, n);
      EXPECT_GE(c, -7);
      EXPECT_LE(std::fabs(c * scale - x[i]), scale * 0.5f + 1e-6f) << i;
    }
  }
  std::vector<float> zero(16, 0.0f);
  std::vector<uint8_t> y(8, 0x55);
  float scale = 1;
  quantize_row_q4(zero.data(), y.data(), &scale, 16);
  EXPECT_EQ(scale, 0.0f);
  for (uint8_t e : y) EXPECT_EQ(e, 0x88);  // code 0 on both sides
}

// The nibble order kernels.h documents: groups of 32 (the last one g
// elements), byte j holding elements j (low) and j + g / 2 (high).
TEST(Attention, Q4RowLayout) {
  const int n = 40;  // a group of 32, then one of 8
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 15 - 7);  // codes = values, scale 1
  x[0] = -7.0f;
  std::vector<uint8_t> y(n / 2);
  float scale = 0;
  quantize_row_q4(x.data(), y.data(), &scale, n);
  ASSERT_FLOAT_EQ(scale, 1.0f);
  auto nib = [](float v) { return static_cast<uint8_t>(static_cast<int>(v) + 8); };
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], nib(x[j]) | nib(x[j + 16]) << 4) << "byte " << j;
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[16 + j], nib(x[32 + j]) | nib(x[36 + j]) << 4) << "byte " << 16 + j;
}

// The same tolerance as for fp16 rows (the 4-bit codes convert exactly).
// head_dim 24, 40, 8 and 4 are not whole groups of 32: the SIMD levels hand
// them to the scalar twin, which must then agree exactly.
TEST(Attention, EveryIsaMatchesScalarQ4) {
  const std::vector<Case> cases = {{128, 2, 1}, {128, 2, 512}, {128, 16, 97}, {64, 8, 130}, {32, 3, 70},
                                   {96, 5, 9},  {24, 5, 9},    {40, 7, 200},  {8, 2, 3},    {128, 4, 63}};
  expect_every_isa_matches_scalar(cases, 30, true, [](const KernelTable& t, Inputs& in, float* scratch) {
    const int hd = static_cast<int>(in.q[0].size());
    Q4Inputs q4(in, hd);
    t.attention_heads_q4(in.qs, q4.krows(), q4.vrows(), hd, 0.09f, scratch);
  });
}

}  // namespace
}  // namespace pocket::kernels
