#include "heads/train_head.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "heads/head_file.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::heads {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<Example> without_label(const std::vector<Example>& d, const std::string& label) {
  std::vector<Example> out;
  for (const Example& e : d)
    if (label.empty() || e.label != label) out.push_back(e);
  return out;
}

// In-scope accuracy (right label and not rejected) and out-of-scope recall
// (rejected) at threshold t.
std::pair<double, double> route_scores(const Matrix& probs, const std::vector<int>& y, const std::vector<bool>& oos,
                                       float t) {
  int64_t in = 0, in_right = 0, out = 0, out_right = 0;
  for (int64_t i = 0; i < probs.rows; ++i) {
    const float* p = probs.row(i);
    const int pred = static_cast<int>(std::max_element(p, p + probs.cols) - p);
    const bool rejected = p[pred] < t;
    if (oos[static_cast<size_t>(i)]) {
      ++out, out_right += rejected;
    } else {
      ++in, in_right += !rejected && pred == y[static_cast<size_t>(i)];
    }
  }
  return {in ? static_cast<double>(in_right) / in : 0.0, out ? static_cast<double>(out_right) / out : 0.0};
}

}  // namespace

Matrix head_probabilities(const Head& head, const Matrix& raw, ThreadPool* pool) {
  Matrix z = logits(head.net, standardize(raw, head.mean, head.inv_std), pool);
  for (int64_t i = 0; i < z.rows; ++i) softmax(z.row(i), z.cols, head.temperature);
  return z;
}

SplitMetrics evaluate_split(const Head& head, const std::string& split, const Matrix& raw, const std::vector<Example>& data,
                            const std::string& oos_label, ThreadPool* pool) {
  SplitMetrics s;
  s.split = split;
  const Matrix probs = head_probabilities(head, raw, pool);
  const std::vector<int> y = label_indices(data, head.labels);
  std::vector<bool> oos(data.size(), false);
  Matrix in_probs;
  in_probs.cols = probs.cols;
  std::vector<int> in_y;
  for (size_t i = 0; i < data.size(); ++i) {
    oos[i] = !oos_label.empty() && data[i].label == oos_label;
    s.oos_examples += oos[i];
    if (oos[i]) continue;
    in_probs.data.insert(in_probs.data.end(), probs.row(static_cast<int64_t>(i)), probs.row(static_cast<int64_t>(i)) + probs.cols);
    ++in_probs.rows;
    in_y.push_back(y[i]);
  }
  s.m = evaluate(in_probs, in_y, head.classes());
  if (!oos_label.empty()) {
    s.has_oos = true;
    std::tie(s.in_scope_accuracy, s.oos_recall) = route_scores(probs, y, oos, head.threshold);
  }
  return s;
}

uint64_t head_file_bytes(const Head& h) {
  uint64_t b = 0;
  for (const auto* v : {&h.net.w1, &h.net.b1, &h.net.w2, &h.net.b2, &h.mean, &h.inv_std}) b += v->size() * sizeof(float);
  for (const std::string& l : h.labels) b += l.size() + 8;
  return b + 1024;  // metadata keys, header, alignment: about this much
}

TrainHeadResult train_head(std::shared_ptr<const Model> model, const Tokenizer& tok, const std::string& model_hash,
                           const std::vector<Example>& train_set, const std::vector<Example>& val_set,
                           const std::vector<Example>& test_set, const TrainHeadOptions& opt, ThreadPool* pool) {
  if (opt.spec.kind == FeatureSpec::Kind::Hidden && !model) fail("hidden-state features need a model");
  const std::vector<Example> train_in = without_label(train_set, opt.oos_label);
  TrainHeadResult r;
  Head& h = r.head;
  h.name = opt.name;
  h.base_hash = model_hash;
  h.features = opt.spec;
  h.labels = distinct_labels(train_in);
  if (h.labels.size() < 2) fail("the training data has ", h.labels.size(), " label(s); a head needs at least two");
  if (!opt.oos_label.empty()) h.other_label = opt.oos_label;

  auto t0 = std::chrono::steady_clock::now();
  auto extract = [&](const std::vector<Example>& d, const char* label) {
    ExtractOptions e = opt.extract;
    e.progress_label = std::string(label) + " features";
    return extract_features(model, tok, d, opt.spec, e);
  };
  const Matrix x_train_raw = extract(train_set, "train");
  const Matrix x_val_raw = val_set.empty() ? Matrix{0, x_train_raw.cols, {}} : extract(val_set, "val");
  const Matrix x_test_raw = test_set.empty() ? Matrix{0, x_train_raw.cols, {}} : extract(test_set, "test");
  r.feature_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  // Train on the in-scope rows only.
  Matrix xt;
  xt.cols = x_train_raw.cols;
  for (size_t i = 0; i < train_set.size(); ++i)
    if (opt.oos_label.empty() || train_set[i].label != opt.oos_label) {
      xt.data.insert(xt.data.end(), x_train_raw.row(static_cast<int64_t>(i)),
                     x_train_raw.row(static_cast<int64_t>(i)) + xt.cols);
      ++xt.rows;
    }
  fit_standardizer(xt, h.mean, h.inv_std);
  const Matrix xs = standardize(xt, h.mean, h.inv_std);
  const std::vector<int> y = label_indices(train_in, h.labels);
  // Validation: in-scope rows with a known label steer early stopping and calibration.
  Matrix xv;
  xv.cols = xt.cols;
  std::vector<int> yv;
  const std::vector<int> yv_all = label_indices(val_set, h.labels);
  for (size_t i = 0; i < val_set.size(); ++i)
    if (yv_all[i] >= 0) {
      xv.data.insert(xv.data.end(), x_val_raw.row(static_cast<int64_t>(i)), x_val_raw.row(static_cast<int64_t>(i)) + xv.cols);
      ++xv.rows;
      yv.push_back(yv_all[i]);
    }
  const Matrix xvs = standardize(xv, h.mean, h.inv_std);
  r.train = train(xs, y, h.classes(), xvs, yv, opt.train, pool);
  h.net = r.train.net;
  h.temperature = r.train.temperature;
  if (opt.threshold >= 0) {
    h.threshold = opt.threshold;
  } else if (!opt.oos_label.empty() && !val_set.empty()) {
    const Matrix probs = head_probabilities(h, x_val_raw, pool);
    std::vector<bool> oos(val_set.size());
    for (size_t i = 0; i < val_set.size(); ++i) oos[i] = val_set[i].label == opt.oos_label;
    double best = -1;
    for (int k = 0; k <= 100; ++k) {  // thresholds 0.00 .. 1.00
      const float t = static_cast<float>(k) / 100.0f;
      auto [acc, rec] = route_scores(probs, yv_all, oos, t);
      if (acc + rec > best + 1e-12) best = acc + rec, h.threshold = t;
    }
  }
  r.train_seconds = seconds_since(t0);
  h.validate("the trained head");
  r.splits.push_back(evaluate_split(h, "train", x_train_raw, train_set, opt.oos_label, pool));
  if (!val_set.empty()) r.splits.push_back(evaluate_split(h, "val", x_val_raw, val_set, opt.oos_label, pool));
  if (!test_set.empty()) r.splits.push_back(evaluate_split(h, "test", x_test_raw, test_set, opt.oos_label, pool));
  return r;
}

}  // namespace pocket::heads
