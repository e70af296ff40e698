// Pocket files with deterministic synthetic weights at a preset's shape, for
// benchmarks and capacity planning before real weights exist.
#pragma once
#include <cstdint>
#include <string>

#include "convert/pocket_file.h"
#include "core/dtype.h"
#include "tokenizer/vocab.h"

namespace pocket::convert {

struct CreateOptions {
  std::string preset = "pocket-0.3b";  // any name preset_config() knows
  uint64_t seed = 1;
  DType weights = DType::PQ4;  // layer matrices and the embedding / output head
  int group = 64;
  // A tokenizer.json, or a folder holding one (+ tokenizer_config.json): the
  // model carries this real vocabulary and its chat template instead of the
  // synthetic ones, and its vocab_size becomes the tokenizer's.
  std::string tokenizer;
};

// Writes the model tensor by tensor: each is generated in blocks of rows and
// quantized inside the writer's producer, so memory stays at a few MB.
// Values are deterministic in (preset, seed) and independent of the type.
void create_model(const CreateOptions& opt, const std::string& out, const Progress& progress = {});

// A runnable byte-level vocabulary of exactly `vocab_size` tokens: the 256
// GPT-2 byte symbols, placeholders "<|tok_N|>" (user-defined, never produced
// from ordinary text), then <|endoftext|>, <|im_start|>, <|im_end|> (control;
// eos <|im_end|>). No merges: text encodes to one token per byte.
Vocab synthetic_vocab(int vocab_size);

// A ChatML template (the Qwen family's, without tool calls).
const std::string& chatml_template();

}  // namespace pocket::convert
