// Tokenizer metadata of a GGUF file (tokenizer.ggml.*) as a Vocab.
#pragma once
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "tokenizer/vocab.h"

namespace pocket {

// Reads tokenizer.ggml.model "gpt2" (byte-level BPE) or "llama"
// (SentencePiece); throws pocket::Error naming the file and key on anything
// missing, malformed or unsupported. A special-token id that is absent, -1
// or outside the vocabulary means "no such token"; where that is unusual or
// changes behaviour a line is appended to `notes` (when given).
Vocab vocab_from_gguf(const GgufFile& g, std::vector<std::string>* notes = nullptr);

// Ids of tokens that end generation: eos_id plus well-known end-of-turn
// control tokens (<|im_end|>, <|endoftext|>, <|eot_id|>...) present in the
// vocabulary. Also used for Pocket files.
std::vector<int32_t> collect_eos_ids(const Vocab& v, const std::vector<int32_t>& extra);

}  // namespace pocket
