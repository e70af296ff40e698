#include "heads/trainer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::heads {

namespace {

constexpr int64_t kChunk = 16;  // rows per gradient partial; fixed so sums do not depend on threads

void zero_like(const Mlp& net, Mlp& g) {
  g.in = net.in, g.hidden = net.hidden, g.out = net.out;
  g.w1.assign(net.w1.size(), 0.0f), g.b1.assign(net.b1.size(), 0.0f);
  g.w2.assign(net.w2.size(), 0.0f), g.b2.assign(net.b2.size(), 0.0f);
}

template <class F>
void for_each_param(Mlp& a, const Mlp& b, F&& f) {
  auto each = [&](std::vector<float>& x, const std::vector<float>& y) {
    for (size_t i = 0; i < x.size(); ++i) f(x[i], y[i]);
  };
  each(a.w1, b.w1), each(a.b1, b.b1), each(a.w2, b.w2), each(a.b2, b.b2);
}

void run(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (pool && pool->size() > 1 && n > 1)
    pool->parallel_for(n, fn);
  else if (n > 0)
    fn(0, n, 0);
}

}  // namespace

void fit_standardizer(const Matrix& x, std::vector<float>& mean, std::vector<float>& inv_std) {
  const int d = x.cols;
  std::vector<double> s(static_cast<size_t>(d), 0.0), s2(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int j = 0; j < d; ++j) s[j] += x.row(i)[j];
  const double n = static_cast<double>(std::max<int64_t>(x.rows, 1));
  mean.resize(static_cast<size_t>(d)), inv_std.resize(static_cast<size_t>(d));
  for (int j = 0; j < d; ++j) mean[j] = static_cast<float>(s[j] / n);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int j = 0; j < d; ++j) {
      const double v = x.row(i)[j] - mean[j];
      s2[j] += v * v;
    }
  for (int j = 0; j < d; ++j) {
    const double sd = std::sqrt(s2[j] / n);
    inv_std[j] = sd > 1e-8 ? static_cast<float>(1.0 / sd) : 1.0f;
  }
}

Matrix standardize(const Matrix& x, const std::vector<float>& mean, const std::vector<float>& inv_std) {
  Matrix out = x;
  for (int64_t i = 0; i < x.rows; ++i)
    for (int j = 0; j < x.cols; ++j) out.row(i)[j] = (x.row(i)[j] - mean[j]) * inv_std[j];
  return out;
}

double loss_and_grad(const Mlp& net, const Matrix& x, const std::vector<int>& y, const std::vector<float>& class_w,
                     float l2, const std::vector<int64_t>& rows, Mlp* grad, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> loss(static_cast<size_t>(chunks), 0.0), wsum(static_cast<size_t>(chunks), 0.0);
  std::vector<Mlp> parts(grad ? static_cast<size_t>(chunks) : 0);
  const int H = net.hidden, C = net.out, M = net.out_in(), D = net.in;
  run(pool, chunks, [&](int64_t b, int64_t e, int) {
    std::vector<float> h(static_cast<size_t>(std::max(H, 1))), z(static_cast<size_t>(C)), dh(static_cast<size_t>(std::max(H, 1)));
    for (int64_t ch = b; ch < e; ++ch) {
      Mlp* g = grad ? &parts[static_cast<size_t>(ch)] : nullptr;
      if (g) zero_like(net, *g);
      for (int64_t r = ch * kChunk; r < std::min(n, (ch + 1) * kChunk); ++r) {
        const int64_t i = rows[static_cast<size_t>(r)];
        const float* xi = x.row(i);
        const int yi = y[static_cast<size_t>(i)];
        const float w = class_w.empty() ? 1.0f : class_w[static_cast<size_t>(yi)];
        net.forward(xi, z.data(), h.data());
        float mx = *std::max_element(z.begin(), z.end());
        double se = 0;
        for (int c = 0; c < C; ++c) se += std::exp(static_cast<double>(z[c] - mx));
        const double lse = mx + std::log(se);
        loss[static_cast<size_t>(ch)] += w * (lse - z[yi]);
        wsum[static_cast<size_t>(ch)] += w;
        if (!g) continue;
        const float* in = H > 0 ? h.data() : xi;
        if (H > 0) std::fill(dh.begin(), dh.end(), 0.0f);
        for (int c = 0; c < C; ++c) {
          const float d = w * static_cast<float>(std::exp(z[c] - lse) - (c == yi ? 1.0 : 0.0));
          g->b2[c] += d;
          float* gw = g->w2.data() + static_cast<size_t>(c) * M;
          const float* wc = net.w2.data() + static_cast<size_t>(c) * M;
          for (int k = 0; k < M; ++k) gw[k] += d * in[k];
          if (H > 0)
            for (int k = 0; k < H; ++k) dh[k] += d * wc[k];
        }
        if (H > 0)
          for (int j = 0; j < H; ++j) {
            if (h[j] <= 0) continue;
            g->b1[j] += dh[j];
            float* gw = g->w1.data() + static_cast<size_t>(j) * D;
            for (int k = 0; k < D; ++k) gw[k] += dh[j] * xi[k];
          }
      }
    }
  });
  double L = 0, W = 0;
  for (int64_t ch = 0; ch < chunks; ++ch) L += loss[static_cast<size_t>(ch)], W += wsum[static_cast<size_t>(ch)];
  if (W <= 0) W = 1;
  double reg = 0;
  for (const auto* v : {&net.w1, &net.w2})
    for (float a : *v) reg += static_cast<double>(a) * a;
  if (grad) {
    zero_like(net, *grad);
    for (const Mlp& p : parts) for_each_param(*grad, p, [](float& a, float b) { a += b; });
    const float inv = static_cast<float>(1.0 / W);
    for_each_param(*grad, *grad, [&](float& a, float) { a *= inv; });
    for (size_t k = 0; k < net.w1.size(); ++k) grad->w1[k] += l2 * net.w1[k];
    for (size_t k = 0; k < net.w2.size(); ++k) grad->w2[k] += l2 * net.w2[k];
  }
  return L / W + 0.5 * l2 * reg;
}

Matrix logits(const Mlp& net, const Matrix& x, ThreadPool* pool) {
  Matrix z;
  z.rows = x.rows, z.cols = net.out;
  z.data.resize(static_cast<size_t>(z.rows) * z.cols);
  run(pool, x.rows, [&](int64_t b, int64_t e, int) {
    std::vector<float> h(static_cast<size_t>(std::max(net.hidden, 1)));
    for (int64_t i = b; i < e; ++i) net.forward(x.row(i), z.row(i), h.data());
  });
  return z;
}

namespace {

double nll_at(const Matrix& z, const std::vector<int>& y, double t) {
  double s = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < z.rows; ++i) {
    if (y[static_cast<size_t>(i)] < 0) continue;
    const float* r = z.row(i);
    double mx = -INFINITY;
    for (int c = 0; c < z.cols; ++c) mx = std::max(mx, r[c] / t);
    double se = 0;
    for (int c = 0; c < z.cols; ++c) se += std::exp(r[c] / t - mx);
    s += mx + std::log(se) - r[y[static_cast<size_t>(i)]] / t;
    ++n;
  }
  return n ? s / static_cast<double>(n) : 0.0;
}

}  // namespace

float fit_temperature(const Matrix& z, const std::vector<int>& y) {
  double a = std::log(0.05), b = std::log(20.0);  // golden-section search on log T
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = nll_at(z, y, std::exp(c)), fd = nll_at(z, y, std::exp(d));
  for (int it = 0; it < 60; ++it) {
    if (fc < fd) {
      b = d, d = c, fd = fc, c = b - g * (b - a), fc = nll_at(z, y, std::exp(c));
    } else {
      a = c, c = d, fc = fd, d = a + g * (b - a), fd = nll_at(z, y, std::exp(d));
    }
  }
  return static_cast<float>(std::exp((a + b) / 2));
}

TrainResult train(const Matrix& x, const std::vector<int>& y, int classes, const Matrix& xv, const std::vector<int>& yv,
                  const TrainOptions& opt, ThreadPool* pool, const std::function<void(const EpochLog&)>& on_epoch) {
  if (x.rows == 0) fail("no training examples");
  if (classes < 2) fail("training needs at least two classes (found ", classes, ")");
  if (opt.hidden < 0 || opt.batch_size < 1 || opt.max_epochs < 1 || !(opt.learning_rate > 0) || !(opt.l2 >= 0))
    fail("invalid training options (hidden >= 0, batch >= 1, epochs >= 1, learning rate > 0, l2 >= 0)");
  std::vector<float> cw;
  if (opt.class_weights) {
    std::vector<int64_t> count(static_cast<size_t>(classes), 0);
    for (int v : y) ++count[static_cast<size_t>(v)];
    cw.resize(static_cast<size_t>(classes));
    for (int c = 0; c < classes; ++c)
      cw[c] = count[c] ? static_cast<float>(static_cast<double>(x.rows) / (classes * static_cast<double>(count[c]))) : 0.0f;
  }
  TrainResult r;
  r.net.init(x.cols, opt.hidden, classes, opt.seed);
  Mlp m, v, g;
  zero_like(r.net, m), zero_like(r.net, v);
  Mlp best = r.net;
  double best_val = INFINITY;
  std::vector<int64_t> order(static_cast<size_t>(x.rows));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> val_rows;
  for (int64_t i = 0; i < xv.rows; ++i)
    if (yv[static_cast<size_t>(i)] >= 0) val_rows.push_back(i);
  std::mt19937_64 rng(opt.seed ^ 0x9E3779B97F4A7C15ull);
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int64_t step = 0;
  int since_best = 0;
  for (int epoch = 1; epoch <= opt.max_epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
    double train_loss = 0;
    int64_t batches = 0;
    for (size_t b = 0; b < order.size(); b += static_cast<size_t>(opt.batch_size)) {
      std::vector<int64_t> rows(order.begin() + static_cast<std::ptrdiff_t>(b),
                                order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + opt.batch_size)));
      train_loss += loss_and_grad(r.net, x, y, cw, opt.l2, rows, &g, pool);
      ++batches, ++step;
      const double c1 = 1 - std::pow(b1, static_cast<double>(step)), c2 = 1 - std::pow(b2, static_cast<double>(step));
      auto update = [&](std::vector<float>& p, std::vector<float>& mm, std::vector<float>& vv, const std::vector<float>& gg) {
        for (size_t k = 0; k < p.size(); ++k) {
          mm[k] = static_cast<float>(b1 * mm[k] + (1 - b1) * gg[k]);
          vv[k] = static_cast<float>(b2 * vv[k] + (1 - b2) * gg[k] * gg[k]);
          p[k] -= static_cast<float>(opt.learning_rate * (mm[k] / c1) / (std::sqrt(vv[k] / c2) + eps));
        }
      };
      update(r.net.w1, m.w1, v.w1, g.w1), update(r.net.b1, m.b1, v.b1, g.b1);
      update(r.net.w2, m.w2, v.w2, g.w2), update(r.net.b2, m.b2, v.b2, g.b2);
    }
    EpochLog log{epoch, train_loss / static_cast<double>(std::max<int64_t>(batches, 1)), 0, 0};
    r.epochs = epoch;
    if (!val_rows.empty()) {
      log.val_loss = loss_and_grad(r.net, xv, yv, {}, 0.0f, val_rows, nullptr, pool);
      Matrix z = logits(r.net, xv, pool);
      int64_t right = 0;
      for (int64_t i : val_rows)
        right += std::max_element(z.row(i), z.row(i) + classes) - z.row(i) == yv[static_cast<size_t>(i)];
      log.val_accuracy = static_cast<double>(right) / static_cast<double>(val_rows.size());
    }
    r.log.push_back(log);
    if (on_epoch) on_epoch(log);
    if (val_rows.empty()) {
      best = r.net, r.best_epoch = epoch;
      continue;
    }
    if (log.val_loss < best_val - 1e-6) {
      best_val = log.val_loss, best = r.net, r.best_epoch = epoch, since_best = 0;
    } else if (++since_best >= opt.patience) {
      break;
    }
  }
  r.net = best;
  if (opt.calibrate && !val_rows.empty()) r.temperature = fit_temperature(logits(r.net, xv, pool), yv);
  return r;
}

Metrics evaluate(const Matrix& probs, const std::vector<int>& y, int classes, int ece_bins) {
  Metrics m;
  m.n = probs.rows;
  m.confusion.assign(static_cast<size_t>(classes), std::vector<int64_t>(static_cast<size_t>(classes), 0));
  std::vector<double> bin_conf(static_cast<size_t>(ece_bins), 0), bin_acc(static_cast<size_t>(ece_bins), 0);
  std::vector<int64_t> bin_n(static_cast<size_t>(ece_bins), 0), tp(static_cast<size_t>(classes), 0),
      fp(static_cast<size_t>(classes), 0), fn(static_cast<size_t>(classes), 0);
  std::vector<bool> present(static_cast<size_t>(classes), false);
  int64_t right = 0;
  double nll = 0;
  for (int64_t i = 0; i < probs.rows; ++i) {
    const float* p = probs.row(i);
    const int pred = static_cast<int>(std::max_element(p, p + classes) - p);
    const int t = y[static_cast<size_t>(i)];
    const bool ok = pred == t;
    right += ok;
    nll += t >= 0 ? -std::log(std::max(p[t], 1e-12f)) : -std::log(1e-12);
    int b = std::min(ece_bins - 1, static_cast<int>(p[pred] * ece_bins));
    bin_conf[b] += p[pred], bin_acc[b] += ok, ++bin_n[b];
    if (t >= 0) ++m.confusion[t][pred], present[t] = true;
    if (ok) {
      ++tp[pred];
    } else {
      ++fp[pred];
      if (t >= 0) ++fn[t];
    }
  }
  if (m.n == 0) return m;
  m.accuracy = static_cast<double>(right) / static_cast<double>(m.n);
  m.nll = nll / static_cast<double>(m.n);
  for (int b = 0; b < ece_bins; ++b)
    if (bin_n[b]) m.ece += std::abs(bin_acc[b] - bin_conf[b]) / static_cast<double>(m.n);
  double f1 = 0;
  int counted = 0;
  for (int c = 0; c < classes; ++c) {
    if (!present[c] && tp[c] + fp[c] == 0) continue;  // classes absent from truth and predictions
    const double denom = 2.0 * tp[c] + fp[c] + fn[c];
    f1 += denom > 0 ? 2.0 * tp[c] / denom : 0.0;
    ++counted;
  }
  m.macro_f1 = counted ? f1 / counted : 0.0;
  return m;
}

std::vector<std::string> distinct_labels(const std::vector<Example>& data) {
  std::set<std::string> s;
  for (const Example& e : data) s.insert(e.label);
  return {s.begin(), s.end()};
}

std::vector<int> label_indices(const std::vector<Example>& data, const std::vector<std::string>& labels) {
  std::map<std::string, int> idx;
  for (size_t i = 0; i < labels.size(); ++i) idx[labels[i]] = static_cast<int>(i);
  std::vector<int> y;
  y.reserve(data.size());
  for (const Example& e : data) {
    auto it = idx.find(e.label);
    y.push_back(it == idx.end() ? -1 : it->second);
  }
  return y;
}

}  // namespace pocket::heads
