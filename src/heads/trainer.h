// The CPU trainer of decision heads: multinomial logistic regression or a
// one-hidden-layer MLP on standardised features, weighted cross-entropy
// (class weights for imbalance) + L2, Adam on seed-shuffled minibatches,
// early stopping on the validation loss, then temperature calibration on
// the validation split. Gradients are summed over fixed 16-row chunks in a
// fixed order, so results are identical for any thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "heads/features.h"
#include "heads/head.h"

namespace pocket {
class ThreadPool;
}

namespace pocket::heads {

struct TrainOptions {
  int hidden = 0;              // 0: logistic regression
  float l2 = 1e-4f;            // on the weights (not the biases)
  bool class_weights = true;   // weight each class by n / (classes * count)
  int max_epochs = 60;
  int patience = 6;            // epochs without a better validation loss before stopping
  float learning_rate = 3e-3f;
  int batch_size = 64;
  uint64_t seed = 1;
  bool calibrate = true;
};

struct EpochLog {
  int epoch;
  double train_loss, val_loss, val_accuracy;
};

struct TrainResult {
  Mlp net;
  float temperature = 1.0f;
  int epochs = 0, best_epoch = 0;
  std::vector<EpochLog> log;
};

// Per-feature mean and 1/std (1 where a feature is constant).
void fit_standardizer(const Matrix& x, std::vector<float>& mean, std::vector<float>& inv_std);
Matrix standardize(const Matrix& x, const std::vector<float>& mean, const std::vector<float>& inv_std);

// Weighted mean cross-entropy + l2/2 * |weights|^2 over `rows` of x, and its
// gradient (same shape as net) when `grad` is set. Exposed for the
// finite-difference test.
double loss_and_grad(const Mlp& net, const Matrix& x, const std::vector<int>& y, const std::vector<float>& class_w,
                     float l2, const std::vector<int64_t>& rows, Mlp* grad, ThreadPool* pool);

// Trains on standardised x/y (labels 0..classes-1); `xv`/`yv` is the
// validation split (may be empty: no early stopping or calibration).
TrainResult train(const Matrix& x, const std::vector<int>& y, int classes, const Matrix& xv, const std::vector<int>& yv,
                  const TrainOptions& opt, ThreadPool* pool, const std::function<void(const EpochLog&)>& on_epoch = {});

// Logits of every row (rows x classes).
Matrix logits(const Mlp& net, const Matrix& x, ThreadPool* pool);
// The temperature minimising the NLL of softmax(logits / T) over y.
float fit_temperature(const Matrix& logits, const std::vector<int>& y);

struct Metrics {
  int64_t n = 0;
  double accuracy = 0, macro_f1 = 0, ece = 0, nll = 0;
  std::vector<std::vector<int64_t>> confusion;  // [truth][predicted]; truth -1 (unknown label) not counted there
};
// probs: rows x classes (calibrated); y may hold -1 for labels the head does not know (always wrong).
Metrics evaluate(const Matrix& probs, const std::vector<int>& y, int classes, int ece_bins = 15);

// Label names -> indices in `labels` (-1 for names it lacks).
std::vector<int> label_indices(const std::vector<Example>& data, const std::vector<std::string>& labels);
// Sorted distinct labels of `data`.
std::vector<std::string> distinct_labels(const std::vector<Example>& data);

}  // namespace pocket::heads
