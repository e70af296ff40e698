#include "tokenizer/hf_json.h"

#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

Vocab vocab_from_hf_json_text(const std::string& tokenizer_json, const std::string& tokenizer_config,
                              const std::string& source, std::string* chat_template) {
  fail(source, ": tokenizer.json loading is not implemented yet");
}

Vocab vocab_from_hf_json(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path,
                         std::string* chat_template) {
  std::string config = tokenizer_config_path.empty() ? std::string() : read_text_file(tokenizer_config_path);
  return vocab_from_hf_json_text(read_text_file(tokenizer_json_path), config, tokenizer_json_path, chat_template);
}

}  // namespace pocket
