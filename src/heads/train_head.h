// The whole `pocket train-head` pipeline as a library call: features of the
// training and validation sets (cached), standardisation, training,
// calibration, the out-of-scope threshold, and metrics per split.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "heads/dataset.h"
#include "heads/features.h"
#include "heads/head.h"
#include "heads/trainer.h"

namespace pocket {
class ThreadPool;
}

namespace pocket::heads {

struct TrainHeadOptions {
  std::string name = "default";
  FeatureSpec spec;
  TrainOptions train;
  ExtractOptions extract;
  // Examples with this label are "not mine": they are kept out of the
  // classes; in the validation split they tune the threshold (largest mean of
  // in-scope accuracy and out-of-scope recall); `other_label` is what route answers.
  std::string oos_label;
  float threshold = -1.0f;  // >= 0: use this threshold instead of tuning one
};

struct SplitMetrics {
  std::string split;
  Metrics m;
  // With an out-of-scope label: after routing at the head's threshold.
  bool has_oos = false;
  double in_scope_accuracy = 0, oos_recall = 0;
  int64_t oos_examples = 0;
};

struct TrainHeadResult {
  Head head;
  TrainResult train;
  std::vector<SplitMetrics> splits;
  double feature_seconds = 0, train_seconds = 0;
};

// `model` may be null for a bag-of-tokens head. `model_hash` is what the
// head names as its base. `test` may be empty.
TrainHeadResult train_head(std::shared_ptr<const Model> model, const Tokenizer& tok, const std::string& model_hash,
                           const std::vector<Example>& train_set, const std::vector<Example>& val_set,
                           const std::vector<Example>& test_set, const TrainHeadOptions& opt, ThreadPool* pool);

// Metrics of a trained head on precomputed raw features.
SplitMetrics evaluate_split(const Head& head, const std::string& split, const Matrix& raw, const std::vector<Example>& data,
                            const std::string& oos_label, ThreadPool* pool);

// Probabilities (rows x classes) of raw features under the head.
Matrix head_probabilities(const Head& head, const Matrix& raw, ThreadPool* pool);

// Bytes of the head's stand-alone file (as save_head writes it).
uint64_t head_file_bytes(const Head& h);

}  // namespace pocket::heads
