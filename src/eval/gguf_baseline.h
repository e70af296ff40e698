// GGUF files with llama.cpp's plain block types (Q4_0 / Q8_0), written with
// Pocket's own GGUF writer and quantizer: the baselines that Pocket's PQ
// formats are compared against in the quantization quality table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "formats/model_file.h"

namespace pocket::eval {

struct GgufBaselineOptions {
  DType type = DType::Q4_0;      // Q4_0 or Q8_0: every 2-D weight whose rows split into 32-blocks
  DType fallback = DType::Q8_0;  // 2-D weights whose row length is not a multiple of 32 (F32, F16 or Q8_0 if it fits)
  std::string tokenizer_path;    // passed to open_model
};

// Writes `in` (any format Pocket opens) as a plain GGUF file (no Pocket
// metadata; tokenizer as tokenizer.ggml.*). Unlike llama.cpp's Q4_0 preset,
// the tied embedding / output head is quantized to `type` too (llama.cpp
// keeps it at Q6_K). Norms and biases stay F32. A fallback of Q8_0 for a row
// length that is not a multiple of 32 falls further back to F32.
void write_gguf_baseline(const std::string& in, const std::string& out, const GgufBaselineOptions& opt);

// Storage of a model's tensors, for bits-per-weight figures.
struct WeightStats {
  int64_t elements = 0;  // all tensors, norms included
  uint64_t bytes = 0;    // their stored bytes
  struct PerType {
    DType type;
    int64_t elements = 0;
    int tensors = 0;
  };
  std::vector<PerType> by_type;  // in DType order
  double bits_per_weight() const { return elements > 0 ? 8.0 * static_cast<double>(bytes) / elements : 0.0; }
};
WeightStats weight_stats(const ModelFile& f);

}  // namespace pocket::eval
