// PQ4 / PQ5 group fit: choose scale s and offset m (value = s * q + m, q in
// 0..qmax: 15 for PQ4, 31 for PQ5) that minimise the squared error of a group.
//
// Search: a handful of clipped ranges give starting code assignments; for
// each, the least-squares (s, m) of those codes is closed form, and its
// error follows from five sums without another pass over the data. The
// best candidate is then re-coded and re-fitted twice. Every inner loop is
// branch-free float arithmetic the compiler vectorises.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quantize.h"
#include "util/half.h"

namespace pocket::quant {

namespace {

float round_half(float v) { return f16_to_f32(f32_to_f16(v)); }

// Adding and subtracting 1.5 * 2^23 rounds a float in [0, 2^22) to the
// nearest integer (ties to even) in the default rounding mode, and unlike
// std::nearbyint it vectorises on baseline x86-64.
constexpr float kRoundMagic = 12582912.0f;

inline float code_of(float x, float m, float inv_s, float qmax) {
  float t = (x - m) * inv_s;
  t = t < 0.0f ? 0.0f : t;
  t = t > qmax ? qmax : t;
  return (t + kRoundMagic) - kRoundMagic;
}

// Sums of the codes of x under (m, 1/s) that the least-squares fit needs.
struct CodeSums {
  double q = 0, qq = 0, qx = 0;
};

// Four group elements at a time in a GCC/Clang vector: portable code that
// lowers to SSE2 on baseline x86-64 and NEON on aarch64 (the compiler does
// not vectorise the scalar loop: float sums are not associative).
constexpr int kLanes = 4;
typedef float F4 __attribute__((vector_size(4 * kLanes)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline F4 codes_of(F4 x, float m, float inv_s, float qmax) {
  F4 t = (x - m) * inv_s;
  t = t < 0.0f ? F4{} : t;
  t = t > qmax ? F4{} + qmax : t;
  return (t + kRoundMagic) - kRoundMagic;
}

CodeSums code_sums(const float* x, int n, float m, float inv_s, float qmax) {
  F4 q{}, qq{}, qx{};  // q and qq hold exact integers
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F4 xv = load4(x + i), c = codes_of(xv, m, inv_s, qmax);
    q += c;
    qq += c * c;
    qx += c * xv;
  }
  CodeSums s;
  for (; i < n; ++i) {  // tail of a partial group
    float c = code_of(x[i], m, inv_s, qmax);
    s.q += c, s.qq += c * c, s.qx += c * x[i];
  }
  for (int j = 0; j < kLanes; ++j) s.q += q[j], s.qq += qq[j], s.qx += qx[j];
  return s;
}

// Exact squared error of the codes `quantize` will store for p.
double true_error(const float* x, int n, Pq4Params p, float qmax) {
  if (!(p.s > 0.0f)) return INFINITY;
  const float inv = 1.0f / p.s;
  double e = 0;
  for (int i = 0; i < n; ++i) {
    double d = static_cast<double>(p.s) * code_of(x[i], p.m, inv, qmax) + p.m - x[i];
    e += d * d;
  }
  return e;
}

struct GroupStats {
  int n;
  double sx, sxx;  // sum of x and of x^2
};

// Least-squares (s, m) for the codes of `start`, rounded to fp16 as stored,
// with its squared error for those codes. Re-coding x to the nearest codes
// under the result can only lower that error, so it is an upper bound.
bool refit(const float* x, const GroupStats& g, Pq4Params start, float qmax, Pq4Params* out, double* err) {
  if (!(start.s > 0.0f)) return false;
  const CodeSums c = code_sums(x, g.n, start.m, 1.0f / start.s, qmax);
  const double det = g.n * c.qq - c.q * c.q;
  if (det <= 0) return false;
  const double s_ls = (g.n * c.qx - c.q * g.sx) / det;
  if (!(s_ls > 0)) return false;
  const Pq4Params p{round_half(static_cast<float>(s_ls)), round_half(static_cast<float>((g.sx - s_ls * c.q) / g.n))};
  if (!(p.s > 0.0f)) return false;
  const double s = p.s, m = p.m;
  // sum (s q + m - x)^2 expanded into the sums.
  *err = s * s * c.qq + 2 * s * m * c.q + g.n * m * m - 2 * s * c.qx - 2 * m * g.sx + g.sxx;
  *out = p;
  return true;
}

}  // namespace

int pq4_code(float x, Pq4Params p, int qmax) {
  if (!(p.s > 0.0f)) return 0;
  return static_cast<int>(code_of(x, p.m, 1.0f / p.s, static_cast<float>(qmax)));
}

void pq4_codes(const float* x, int n, Pq4Params p, uint8_t* codes, int qmax) {
  const float inv = p.s > 0.0f ? 1.0f / p.s : 0.0f;  // s == 0: every code 0
  for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(code_of(x[i], p.m, inv, static_cast<float>(qmax)));
}

Pq4Params minmax_pq4_group(const float* x, int n, int qmax) {
  float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  return {round_half((hi - lo) / static_cast<float>(qmax)), round_half(lo)};
}

Pq4Params fit_pq4_group(const float* x, int n, int qmax_int) {
  const float qmax = static_cast<float>(qmax_int);
  const float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  if (!(hi > lo)) return {0.0f, round_half(lo)};
  GroupStats g{n, 0, 0};
  for (int i = 0; i < n; ++i) {
    g.sx += x[i];
    g.sxx += static_cast<double>(x[i]) * x[i];
  }
  const Pq4Params minmax = minmax_pq4_group(x, n, qmax_int);
  Pq4Params best = minmax;
  double best_err = true_error(x, n, minmax, qmax);
  auto consider = [&](Pq4Params start) {
    Pq4Params p;
    double e;
    if (refit(x, g, start, qmax, &p, &e) && e < best_err) best = p, best_err = e;
  };
  // Starting ranges clip either end by up to ~20% of the range: an outlier
  // costs less than the resolution lost on every other element.
  const float range = hi - lo;
  static constexpr float kClip[] = {0.0f, 0.05f, 0.1f, 0.2f};
  for (float cl : kClip)
    for (float ch : kClip) {
      const float a = lo + cl * range, b = hi - ch * range;
      consider({(b - a) / qmax, a});
    }
  for (int it = 0; it < 2; ++it) consider(best);
  // The sums are float: confirm the choice against the exact error.
  return true_error(x, n, best, qmax) <= true_error(x, n, minmax, qmax) ? best : minmax;
}

}  // namespace pocket::quant
