// Shared pieces of the Pocket file writers (`pocket quantize`, `pocket
// create`): option parsing, the file-level metadata, and tensors that are
// quantized chunk by chunk while the file is written, so no full-model copy
// is ever held in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "formats/gguf_writer.h"
#include "core/config.h"
#include "tokenizer/vocab.h"

namespace pocket::convert {

// "q4" -> PQ4, "q5" -> PQ5, "q8" -> PQ8, "f16" -> F16, "f32" -> F32 (when allow_f32).
// `option` names the command-line option in the error message.
DType parse_weight_type(const std::string& s, const std::string& option, bool allow_f32 = true);
// Checks a PQ group size (32, 64 or 128).
int parse_group(int group, const std::string& option);

// Called after each tensor is written: tensor index (1-based), tensor count,
// bytes of tensor data written so far.
using Progress = std::function<void(size_t done, size_t total, uint64_t bytes)>;
// A one-line progress display on stderr ("tensor i/N, MB written") when
// stderr is a terminal; an empty Progress otherwise.
Progress terminal_progress();

// A writer with alignment 64 and pocket.version, pocket.quant.group_size,
// the `<arch>.*` config, the tokenizer in Pocket's binary form
// (pocket.tokenizer) and tokenizer.chat_template (when non-empty): exactly
// what the GGUF/Pocket reader expects.
GgufWriter pocket_writer(const ModelConfig& c, const Vocab& vocab, const std::string& chat_template, int group);

// Fills rows [row0, row0 + n) of a tensor as f32 (n * cols floats at `out`).
using RowSource = std::function<void(int64_t row0, int64_t n, float* out)>;

// Adds a tensor whose bytes are produced during write(): rows are pulled
// from `source` in chunks of a few MB and quantized to `type`. `on_done`
// (may be empty) runs after the tensor's bytes are written.
void add_streamed_tensor(GgufWriter& w, const std::string& name, DType type, std::vector<int64_t> shape, int group,
                         RowSource source, std::function<void(uint64_t nbytes)> on_done = {});

// Tensors that stay f32 whatever the requested weight type: 1-D tensors,
// norms and biases.
bool keep_f32(const std::string& name, const std::vector<int64_t>& shape);

}  // namespace pocket::convert
