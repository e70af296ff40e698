// Tokenizers stored in files next to (or named for) a model.
#pragma once
#include <string>

#include "tokenizer/vocab.h"

namespace pocket {

// Loads an explicitly named tokenizer file: a Hugging Face tokenizer.json
// (with tokenizer_config.json from the same folder when present) or else a
// llama2.c tokenizer.bin with `vocab_size` entries. Sets *chat_template when
// the file provides one.
Vocab load_tokenizer_file(const std::string& path, int vocab_size, std::string* chat_template);

std::string parent_dir(const std::string& path);  // "." for a bare file name
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace pocket
