#include "heads/head.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "util/error.h"

namespace pocket::heads {

const char* pooling_name(Pooling p) { return p == Pooling::Last ? "last" : "mean"; }

Pooling parse_pooling(const std::string& s) {
  if (s == "last") return Pooling::Last;
  if (s == "mean") return Pooling::Mean;
  fail("pooling '", s, "' is not supported (last or mean)");
}

void Mlp::init(int in_, int hidden_, int out_, uint64_t seed) {
  in = in_, hidden = hidden_, out = out_;
  std::mt19937_64 rng(seed);
  auto fill = [&](std::vector<float>& w, size_t n, int fan_in) {
    std::normal_distribution<double> nd(0.0, 1.0 / std::sqrt(static_cast<double>(std::max(fan_in, 1))));
    w.resize(n);
    for (float& v : w) v = static_cast<float>(nd(rng));
  };
  if (hidden > 0) {
    fill(w1, static_cast<size_t>(hidden) * in, in);
    b1.assign(static_cast<size_t>(hidden), 0.0f);
  } else {
    w1.clear(), b1.clear();
  }
  fill(w2, static_cast<size_t>(out) * out_in(), out_in());
  if (hidden == 0) std::fill(w2.begin(), w2.end(), 0.0f);  // a linear model starts at uniform probabilities
  b2.assign(static_cast<size_t>(out), 0.0f);
}

void Mlp::forward(const float* x, float* logits, float* scratch) const {
  const float* h = x;
  if (hidden > 0) {
    for (int j = 0; j < hidden; ++j) {
      const float* w = w1.data() + static_cast<size_t>(j) * in;
      float s = b1[j];
      for (int k = 0; k < in; ++k) s += w[k] * x[k];
      scratch[j] = s > 0 ? s : 0;
    }
    h = scratch;
  }
  const int m = out_in();
  for (int c = 0; c < out; ++c) {
    const float* w = w2.data() + static_cast<size_t>(c) * m;
    float s = b2[c];
    for (int k = 0; k < m; ++k) s += w[k] * h[k];
    logits[c] = s;
  }
}

void softmax(float* v, int n, float temperature) {
  // In double, with every scaled logit clamped to a finite range (NaN counts
  // as the lowest): finite weights can still overflow float to +-inf in a
  // hostile or badly trained head, and inf - inf would make every
  // probability NaN. The answer stays a distribution: the largest logits
  // share the mass.
  constexpr double kLimit = 1e300;
  std::vector<double> z(static_cast<size_t>(n));
  double mx = -kLimit;
  for (int i = 0; i < n; ++i) {
    const double x = static_cast<double>(v[i]) / temperature;
    z[i] = std::isnan(x) ? -kLimit : std::clamp(x, -kLimit, kLimit);
    mx = std::max(mx, z[i]);
  }
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (z[i] = std::exp(z[i] - mx));
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(z[i] / sum);
}

std::vector<float> Head::probabilities(const float* feature) const {
  std::vector<float> x(static_cast<size_t>(net.in)), scratch(static_cast<size_t>(std::max(net.hidden, 1)));
  for (int k = 0; k < net.in; ++k) x[k] = (feature[k] - mean[k]) * inv_std[k];
  std::vector<float> p(static_cast<size_t>(net.out));
  net.forward(x.data(), p.data(), scratch.data());
  softmax(p.data(), net.out, temperature);
  return p;
}

void Head::validate(const std::string& what) const {
  constexpr int kMaxDim = 1 << 20, kMaxHidden = 1 << 16, kMaxClasses = 1 << 16;
  if (net.in < 1 || net.in > kMaxDim) fail(what, ": feature size ", net.in, " is outside 1..", kMaxDim);
  if (net.hidden < 0 || net.hidden > kMaxHidden) fail(what, ": hidden size ", net.hidden, " is outside 0..", kMaxHidden);
  if (net.out < 2 || net.out > kMaxClasses) fail(what, ": ", net.out, " classes (need 2..", kMaxClasses, ")");
  if (static_cast<int>(labels.size()) != net.out)
    fail(what, ": ", labels.size(), " label names for ", net.out, " outputs");
  const size_t in = static_cast<size_t>(net.in), hid = static_cast<size_t>(net.hidden), out = static_cast<size_t>(net.out);
  if (net.w1.size() != hid * in || net.b1.size() != hid || net.w2.size() != out * net.out_in() || net.b2.size() != out ||
      mean.size() != in || inv_std.size() != in)
    fail(what, ": weight sizes do not match the head's shape (", net.in, " -> ", net.hidden, " -> ", net.out, ")");
  for (const auto* v : {&net.w1, &net.b1, &net.w2, &net.b2, &mean, &inv_std})
    for (float x : *v)
      if (!std::isfinite(x)) fail(what, ": a weight is not a finite number");
  if (!(temperature > 0.0f) || !std::isfinite(temperature)) fail(what, ": temperature ", temperature, " is not positive");
  if (!(threshold >= 0.0f && threshold <= 1.0f)) fail(what, ": threshold ", threshold, " is outside 0..1");
  if (features.layer < -1 || features.layer > 4096) fail(what, ": layer ", features.layer, " is out of range");
  if (features.kind == FeatureSpec::Kind::Tokens && features.buckets != net.in)
    fail(what, ": a bag-of-tokens head with ", features.buckets, " buckets must read ", features.buckets, " features");
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (labels[i] == labels[j]) fail(what, ": label '", labels[i], "' appears twice");
}

}  // namespace pocket::heads
