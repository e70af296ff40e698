// Loader for llama2.c's tokenizer.bin.
#pragma once
#include <string>

#include "tokenizer/vocab.h"

namespace pocket {

// Reads a llama2.c tokenizer.bin with `vocab_size` entries (bos=1, eos=2,
// <0xNN> byte tokens at 3..258 when present). The result is a
// SentencePiece-style vocabulary with add_space_prefix set, as llama2.c's
// encoder prepends a space.
Vocab vocab_from_llama2c(const std::string& path, int vocab_size);

// Same, from bytes already in memory; `source` names them in errors.
Vocab vocab_from_llama2c_bytes(const uint8_t* data, size_t size, int vocab_size, const std::string& source);

}  // namespace pocket
