// Model files with a pruned vocabulary: the token-indexed tensors (token
// embedding, untied output head) keep exactly the rows of the kept tokens, in
// the new order, bytes copied unchanged (so the logits of kept tokens stay
// bit for bit what they were); every other tensor and setting is copied and
// the vocabulary metadata is rewritten. Each file is written under a
// temporary name and renamed when complete.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "prune/vocab_prune.h"

namespace pocket::prune {

// Row n of the result is row new_to_old[n] of `t` (a {vocab, cols} tensor of
// any type: row-contiguous types, GGUF block types, and Pocket's PQ4/PQ8
// tiles, whose rows are regathered exactly). `what` names it in errors.
std::vector<uint8_t> select_rows(const TensorView& t, const std::vector<int32_t>& new_to_old, const std::string& what);

// Does this canonical or Hugging Face tensor name hold one row per token?
bool is_vocab_tensor(const std::string& name);

// GGUF or Pocket file IN -> OUT: tensors as above; tokenizer.ggml.* arrays
// (tokens, scores, token types, merges) and *_token_id keys remapped,
// `<arch>.vocab_size` set, pocket.tokenizer re-serialized.
void write_pruned_gguf(const std::string& in, const std::string& out, const PrunedVocab& p);

// Hugging Face folder IN -> folder OUT: the safetensors file(s) (and index),
// config.json and generation_config.json (vocab_size, bos/eos/pad ids). The
// tokenizer files are the caller's. Returns the files written (relative
// names) with their sizes before and after.
struct WrittenFile {
  std::string name;
  uint64_t before = 0, after = 0;
};
std::vector<WrittenFile> write_pruned_hf_folder(const std::string& in, const std::string& out, const PrunedVocab& p);

// Token ids that a model's own files name outside the tokenizer (GGUF
// tokenizer.ggml.*_token_id; config.json / generation_config.json
// bos/eos/pad ids), so the selection keeps them. Ids outside [0, n_vocab)
// mean "none" and are left out.
std::vector<int32_t> model_token_ids(const std::string& in, size_t n_vocab);

}  // namespace pocket::prune
