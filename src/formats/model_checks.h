// Checks and summaries shared by every model-file loader.
#pragma once
#include <string>

#include "formats/model_file.h"

namespace pocket {

// Sets config.tied_embeddings / qkv_bias / qk_norm from which canonical
// tensors exist (output.weight, blk.0.attn_q.bias, blk.0.attn_q_norm.weight).
void infer_tensor_flags(ModelFile& m);

// Checks that every tensor the config needs exists with the expected shape;
// throws pocket::Error naming the file, the tensor and both shapes.
void check_model_tensors(const ModelFile& m);

std::string shape_string(const std::vector<int64_t>& shape);

// Appends the facts `pocket info` prints (format, dims, parameter count,
// tensor types, file size, tokenizer) to m.info.
void add_model_info(ModelFile& m);

}  // namespace pocket
