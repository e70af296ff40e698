// src/heads/: decision heads on a frozen model. This folder owns the head
// (pooling + linear layer or one-hidden-layer MLP + labels + template +
// out-of-scope threshold), its file form (stand-alone head files and heads
// stored inside Pocket files), labelled-data loading, feature extraction
// with a disk cache, the CPU trainer and its metrics, and the classify /
// rank / route / zero-shot scorers built on them.
//
// head.h: the head itself and how it turns one pooled feature vector into
// calibrated class probabilities.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pocket::heads {

enum class Pooling { Last, Mean };
const char* pooling_name(Pooling p);
Pooling parse_pooling(const std::string& s);  // "last" | "mean"; pocket::Error otherwise

// Which hidden states, pooled how: the input of a head. Kind "tokens" is
// the bag-of-tokens baseline: token counts / token count, folded into
// `buckets` slots (id % buckets), no model run.
struct FeatureSpec {
  enum class Kind { Hidden, Tokens } kind = Kind::Hidden;
  int buckets = 0;  // Tokens only
  Pooling pooling = Pooling::Mean;
  int layer = -1;  // -1: the final normed hidden states; else the residual stream after this layer
  std::string prompt_template;  // "{text}" is replaced by the input; empty = the input as is
};

// A dense network: linear (hidden == 0) or in -> hidden (ReLU) -> out.
// Row-major weights: w1 [hidden x in], w2 [out x (hidden ? hidden : in)].
struct Mlp {
  int in = 0, hidden = 0, out = 0;
  std::vector<float> w1, b1, w2, b2;

  void init(int in, int hidden, int out, uint64_t seed);  // small random weights, zero biases
  int out_in() const { return hidden > 0 ? hidden : in; }
  size_t parameter_count() const { return w1.size() + b1.size() + w2.size() + b2.size(); }
  // logits (out floats) of one input row; `scratch` holds hidden floats.
  void forward(const float* x, float* logits, float* scratch) const;
};

struct Head {
  std::string name = "default";
  std::string base_hash;  // model_content_hash of the model the features come from
  FeatureSpec features;
  std::vector<std::string> labels;
  // Feature standardisation learnt on the training set: x' = (x - mean) * inv_std.
  std::vector<float> mean, inv_std;
  Mlp net;
  float temperature = 1.0f;   // calibrated on the validation split
  float threshold = 0.0f;     // route: below this top probability the answer is `other_label`
  std::string other_label = "other";

  int classes() const { return static_cast<int>(labels.size()); }
  int feature_dim() const { return net.in; }
  // Calibrated probabilities for one raw (unstandardised) feature vector.
  std::vector<float> probabilities(const float* feature) const;
  // Checks every size and value is consistent; pocket::Error naming `what`.
  void validate(const std::string& what) const;
};

// Numerically stable softmax of logits / temperature, in place.
void softmax(float* v, int n, float temperature = 1.0f);

}  // namespace pocket::heads
