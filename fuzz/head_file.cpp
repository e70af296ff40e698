// fuzz_head_file: the input is a decision-head file (a small GGUF with
// head.<name>.* keys and F32 tensors, issue 15), loaded by load_head() as
// `pocket classify --head FILE` does. A head that loads must then classify:
// one feature vector through standardisation, the network and the
// calibrated softmax must give finite probabilities in [0, 1] summing to 1
// (a hostile but "valid" head - huge weights, a tiny temperature - must not
// turn into NaN answers), and the label of the top class must exist.
#include <algorithm>
#include <cmath>

#include "fuzz_util.h"
#include "heads/head_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  const std::string path = fuzz::scratch_path("head", "input.head");
  fuzz::write_file(path, data, size);
  fuzz::guarded([&] {
    heads::Head h = heads::load_head(path);
    std::vector<float> feature(static_cast<size_t>(h.feature_dim()));
    for (size_t i = 0; i < feature.size(); ++i) feature[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;
    const std::vector<float> p = h.probabilities(feature.data());
    if (static_cast<int>(p.size()) != h.classes()) fuzz::finding("probabilities() size differs from the classes");
    double sum = 0;
    for (float v : p) {
      if (!(v >= 0.0f && v <= 1.0f)) fuzz::finding("a class probability is not in [0, 1]: " + std::to_string(v));
      sum += v;
    }
    if (std::fabs(sum - 1.0) > 1e-4) fuzz::finding("class probabilities sum to " + std::to_string(sum));
    const size_t top = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    if (top >= h.labels.size()) fuzz::finding("top class has no label");
  });
  return 0;
}
