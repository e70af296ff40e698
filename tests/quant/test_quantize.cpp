// Quantizer: round trips through the library's dequant_row within stated
// bounds, and PQ4's error-minimising fit beats round-to-nearest baselines.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "core/tensor.h"
#include "kernels/kernels.h"
#include "quant/quantize.h"
#include "util/error.h"
#include "util/half.h"

namespace pocket {
namespace {

using test::Rng;

std::vector<float> uniform_data(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

// Student-t-like heavy tails: a Gaussian divided by a random scale.
std::vector<float> heavy_tailed_data(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    float u1 = rng.uniform(1e-6f, 1.0f), u2 = rng.uniform(0.0f, 1.0f);
    float gauss = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    float chi = rng.uniform(0.15f, 1.0f);
    x = 0.05f * gauss / chi;
  }
  return v;
}

TensorView view_of(const std::vector<uint8_t>& bytes, DType t, int64_t rows, int64_t cols, int group) {
  TensorView v;
  v.name = "q";
  v.type = t;
  v.shape = {rows, cols};
  v.data = bytes.data();
  v.nbytes = bytes.size();
  v.group = group;
  return v;
}

std::vector<float> round_trip(const std::vector<float>& w, int64_t rows, int64_t cols, DType t, int group) {
  auto bytes = quantize(w.data(), rows, cols, t, group);
  auto view = view_of(bytes, t, rows, cols, is_pq(t) ? group : 0);
  EXPECT_EQ(bytes.size(), tensor_nbytes(t, view.shape, view.group, "q"));
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) kernels::dequant_row(view, r, out.data() + r * cols);
  return out;
}

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return e / static_cast<double>(a.size());
}

// Element-wise bound: half a quantization step of the element's group plus
// fp16 rounding of the scale (2^-11 relative, times up to 16 codes). Q4_0
// maps the largest magnitude to -8, so the other sign clips: one full step.
// PQ4 clips outliers on purpose; it is checked group by group against
// min/max round-to-nearest in Pq4NeverWorseThanMinMaxPerGroup.
void expect_within_half_step(DType t, int group, int64_t rows, int64_t cols) {
  SCOPED_TRACE(testing::Message() << dtype_name(t) << " group " << group << " " << rows << "x" << cols);
  auto w = uniform_data(rows * cols, 3 + cols);
  auto d = round_trip(w, rows, cols, t, group);
  const int g = is_pq(t) ? group : (t == DType::Q8_0 || t == DType::Q4_0 ? 32 : 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k0 = 0; k0 < cols; k0 += g) {
      float lo = 0, hi = 0, amax = 0;
      for (int64_t k = k0; k < std::min(cols, k0 + g); ++k) {
        float v = w[r * cols + k];
        lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
      }
      double step = 0;
      switch (t) {
        case DType::F32: step = 0; break;
        case DType::F16: step = amax * std::ldexp(1.0, -10); break;
        case DType::BF16: step = amax * std::ldexp(1.0, -7); break;
        case DType::Q8_0: case DType::PQ8: step = amax / 127.0; break;
        case DType::Q4_0: step = 2 * amax / 8.0; break;
        case DType::PQ4: case DType::PQ5: step = hi - lo; break;  // sanity only
        default: FAIL() << "no step size for " << dtype_name(t);
      }
      double tol = step / 2 * 1.01 + amax * std::ldexp(1.0, -10) * 16 + 1e-7;
      for (int64_t k = k0; k < std::min(cols, k0 + g); ++k)
        ASSERT_NEAR(d[r * cols + k], w[r * cols + k], tol) << "r=" << r << " k=" << k;
    }
}

TEST(Quantize, RoundTripWithinHalfAStep) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
    expect_within_half_step(t, 0, 5, 96);
  for (DType t : {DType::PQ4, DType::PQ5, DType::PQ8})
    for (int g : {32, 64, 128}) {
      expect_within_half_step(t, g, 18, 256);
      expect_within_half_step(t, g, 3, 200);  // partial tile and tail group
    }
}

// PQ4 (qmax 15) / PQ5 (qmax 31) min/max round-to-nearest, written here
// independently of the library.
std::vector<float> pq4_minmax_rtn(const std::vector<float>& w, int64_t cols, int g, float qmax = 15) {
  std::vector<float> out(w.size());
  for (size_t r0 = 0; r0 < w.size(); r0 += static_cast<size_t>(cols))
    for (int64_t k0 = 0; k0 < cols; k0 += g) {
      const float* x = &w[r0 + k0];
      int n = static_cast<int>(std::min<int64_t>(g, cols - k0));
      float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
      float s = f16_to_f32(f32_to_f16((hi - lo) / qmax)), m = f16_to_f32(f32_to_f16(lo));
      for (int i = 0; i < n; ++i) {
        float q = s > 0 ? std::clamp(std::nearbyint((x[i] - m) / s), 0.0f, qmax) : 0.0f;
        out[r0 + k0 + i] = s * q + m;
      }
    }
  return out;
}

TEST(Quantize, Pq4SearchBeatsRoundToNearest) {
  const int64_t rows = 64, cols = 512;
  for (int kind = 0; kind < 2; ++kind) {
    auto w = kind == 0 ? uniform_data(rows * cols, 11) : heavy_tailed_data(rows * cols, 12);
    double q4_0 = mse(w, round_trip(w, rows, cols, DType::Q4_0, 0));
    for (int g : {32, 64, 128}) {
      double pq4 = mse(w, round_trip(w, rows, cols, DType::PQ4, g));
      double rtn = mse(w, pq4_minmax_rtn(w, cols, g));
      SCOPED_TRACE(testing::Message() << (kind ? "heavy-tailed" : "uniform") << " group " << g << ": pq4 " << pq4
                                      << " minmax-rtn " << rtn << " q4_0 " << q4_0);
      EXPECT_LT(pq4, rtn);
      if (kind == 1) {
        EXPECT_LT(pq4, 0.9 * rtn);  // clipping pays off on outliers
      }
      if (g == 32) {
        EXPECT_LT(pq4, q4_0);  // same group size as Q4_0
      }
    }
  }
}

// PQ5's 32 levels: the same search as PQ4's over twice the codes beats its
// own min/max round-to-nearest and has about a quarter of PQ4's error.
TEST(Quantize, Pq5SearchBeatsRoundToNearestAndPq4) {
  const int64_t rows = 64, cols = 512;
  for (int kind = 0; kind < 2; ++kind) {
    auto w = kind == 0 ? uniform_data(rows * cols, 21) : heavy_tailed_data(rows * cols, 22);
    for (int g : {32, 64, 128}) {
      const double pq5 = mse(w, round_trip(w, rows, cols, DType::PQ5, g));
      const double pq4 = mse(w, round_trip(w, rows, cols, DType::PQ4, g));
      const double rtn = mse(w, pq4_minmax_rtn(w, cols, g, 31));
      SCOPED_TRACE(testing::Message() << (kind ? "heavy-tailed" : "uniform") << " group " << g << ": pq5 " << pq5
                                      << " pq4 " << pq4 << " minmax-rtn(31) " << rtn);
      EXPECT_LT(pq5, rtn);
      EXPECT_LT(pq5, 0.4 * pq4);
    }
  }
}

TEST(Quantize, Pq4NeverWorseThanMinMaxPerGroup) {
  const int64_t rows = 20, cols = 200;  // partial tile, tail groups
  for (int g : {32, 64, 128}) {
    auto w = heavy_tailed_data(rows * cols, 21 + g);
    auto fit = round_trip(w, rows, cols, DType::PQ4, g);
    auto rtn = pq4_minmax_rtn(w, cols, g);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k0 = 0; k0 < cols; k0 += g) {
        double e_fit = 0, e_rtn = 0;
        for (int64_t k = k0; k < std::min(cols, k0 + g); ++k) {
          size_t i = static_cast<size_t>(r * cols + k);
          e_fit += (fit[i] - static_cast<double>(w[i])) * (fit[i] - static_cast<double>(w[i]));
          e_rtn += (rtn[i] - static_cast<double>(w[i])) * (rtn[i] - static_cast<double>(w[i]));
        }
        ASSERT_LE(e_fit, e_rtn * (1 + 1e-6) + 1e-12) << "group " << g << " r=" << r << " k0=" << k0;
      }
  }
}

// A tensor large enough to be split over threads must give the same bytes
// as quantizing it tile by tile (each call too small to be split).
TEST(Quantize, Pq4ThreadedMatchesTileByTile) {
  const int64_t rows = 165, cols = 512, tile = 16;
  auto w = heavy_tailed_data(rows * cols, 77);
  auto whole = quantize(w.data(), rows, cols, DType::PQ4, 64);
  std::vector<uint8_t> pieces;
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    auto part = quantize(w.data() + r0 * cols, std::min(tile, rows - r0), cols, DType::PQ4, 64);
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  EXPECT_EQ(whole, pieces);
}

TEST(Quantize, RejectsBadInput) {
  std::vector<float> w(64, 0.5f);
  EXPECT_THROW(quantize(w.data(), 2, 32, DType::PQ4, 48), Error);
  EXPECT_THROW(quantize(w.data(), 2, 30, DType::Q4_0, 0), Error);
  EXPECT_THROW(quantize(w.data(), 0, 32, DType::PQ8, 32), Error);
  std::vector<float> sb(256, 0.5f);  // read-only GGUF types are refused, not written as zeros
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q4_1, DType::Q8_K}) EXPECT_THROW(quantize(sb.data(), 1, 256, t, 0), Error);
  w[5] = std::nanf("");
  EXPECT_THROW(quantize(w.data(), 2, 32, DType::PQ4, 32), Error);
  w[5] = 1e6f;
  EXPECT_THROW(quantize(w.data(), 2, 32, DType::Q8_0, 0), Error);
}

TEST(Quantize, ConstantGroupIsExact) {
  std::vector<float> w(2 * 64, 0.25f);
  auto d = round_trip(w, 2, 64, DType::PQ4, 32);
  for (float v : d) EXPECT_EQ(v, 0.25f);
}

}  // namespace
}  // namespace pocket
