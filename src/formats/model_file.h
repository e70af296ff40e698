// A model opened from any supported format, before it becomes a runnable
// Model: config, tensors (views into mmap'd files), tokenizer vocabulary and
// chat template.
//
// Tensors use canonical GGUF-style names, whatever the source format:
//   token_embd.weight            {vocab, dim}
//   output_norm.weight           {dim}
//   output.weight                {vocab, dim}        (absent when tied)
//   blk.N.attn_norm.weight       {dim}
//   blk.N.attn_q.weight          {n_heads*head_dim, dim}   (+ .bias for Qwen2)
//   blk.N.attn_k.weight          {n_kv_heads*head_dim, dim} (+ .bias)
//   blk.N.attn_v.weight          {n_kv_heads*head_dim, dim} (+ .bias)
//   blk.N.attn_output.weight     {dim, n_heads*head_dim}
//   blk.N.attn_q_norm.weight     {head_dim}           (Qwen3)
//   blk.N.attn_k_norm.weight     {head_dim}           (Qwen3)
//   blk.N.ffn_norm.weight        {dim}
//   blk.N.ffn_gate.weight        {hidden_dim, dim}
//   blk.N.ffn_up.weight          {hidden_dim, dim}
//   blk.N.ffn_down.weight        {dim, hidden_dim}
// Extra tensors (draft heads, decision heads, LoRA) may appear under other
// names; the loaders keep them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/config.h"
#include "tokenizer/vocab.h"
#include "util/mapped_file.h"

namespace pocket {

class Tokenizer;

struct ModelFile {
  std::string path;    // as given by the user
  std::string format;  // "gguf", "hf", "llama2c", "pocket"
  ModelConfig config;
  std::map<std::string, TensorView> tensors;
  bool has_vocab = false;
  Vocab vocab;
  // The built tokenizer when the file carried Pocket's binary form (it was
  // built to read that form; the loader reuses it instead of building again).
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string chat_template;  // Jinja source from the file, may be empty
  uint64_t file_size = 0;     // bytes on disk, all files together
  // Human-readable facts for `pocket info` (key -> value), in insertion order.
  std::vector<std::pair<std::string, std::string>> info;
  // Things the loader accepted but a user should know (an out-of-range
  // special-token id treated as none, no end-of-sequence token...). Shown by
  // `pocket info` and printed once to stderr by the commands that generate.
  std::vector<std::string> notes;
  // Keep the mappings (and any small owned buffers) alive with the views.
  std::vector<std::shared_ptr<const MappedFile>> mappings;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers;

  const TensorView* find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
  // Throws pocket::Error naming the file and the missing tensor.
  const TensorView& get(const std::string& name) const;
};

struct OpenOptions {
  // Explicit tokenizer file (llama2.c tokenizer.bin or tokenizer.json);
  // otherwise it is looked for next to the model.
  std::string tokenizer_path;
  bool require_vocab = true;
  // Run GGUF Q4_K matrices as stored rather than as PQ4 with fp16-rounded
  // sub-block scales (Model's exact_kquants; `--exact-kquants`).
  bool exact_kquants = false;
};

// Detects the format (GGUF / Pocket file by magic, a directory as a Hugging
// Face folder, a .safetensors file whose folder holds config.json, else a
// llama2.c checkpoint) and opens it. Throws pocket::Error on any problem.
ModelFile open_model(const std::string& path, const OpenOptions& opts = {});

}  // namespace pocket
