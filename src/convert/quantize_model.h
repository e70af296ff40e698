// Re-quantizes any model Pocket opens into one Pocket file.
#pragma once
#include <string>
#include <vector>

#include "convert/pocket_file.h"
#include "core/dtype.h"
#include "formats/model_file.h"

namespace pocket::convert {

struct QuantizeOptions {
  DType weights = DType::PQ4;  // the big matrices
  DType embed = DType::PQ4;    // token embedding (also the output head when tied)
  DType head = DType::PQ4;     // separate output head (untied models only)
  bool head_given = false;     // false: the head follows `embed`
  int group = 64;              // PQ group size
  std::string tokenizer_path;  // passed to open_model
  // Tensors whose name contains one of these stay f32 (mixed-precision
  // files; like-for-like comparisons with formats that cannot hold a shape).
  std::vector<std::string> keep_f32;
  // Write a plain GGUF instead of a Pocket file: the tokenizer as
  // tokenizer.ggml.* metadata, no pocket.* keys, llama.cpp's default
  // alignment (32), so llama.cpp and gguf-py read it. Only F16 and F32
  // tensors: PQ4/PQ5/PQ8 are Pocket's own types.
  bool plain_gguf = false;
  // Keep each weight's own grid (quant/source_grid.h): Q4_0/Q4_1/Q4_K become
  // PQ4 with their codes, Q5_0/Q5_1 PQ5 and Q8_0 PQ8 with theirs, every other type (and
  // float weights) PQ8 from its values. `weights` is then unused, group must
  // be 32, and the embedding/head follow the source unless embed_given /
  // head_given.
  bool source_grid = false;
  bool embed_given = false;
};

// Opens `in` (any supported format), dequantizes each tensor row by row and
// writes it re-quantized to `out`. Norms, biases and 1-D tensors stay f32.
// Llama models whose RoPE rotates halves (Hugging Face layout) get their q/k
// rows permuted into the adjacent-pair order the GGUF `llama` reader expects.
void quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opt,
                    const Progress& progress = {});

// The target type of one tensor of `f` under `opt`.
DType target_type(const ModelFile& f, const TensorView& t, const QuantizeOptions& opt);

}  // namespace pocket::convert
