#include "formats/external_vocab.h"

#include "tokenizer/hf_json.h"
#include "tokenizer/llama2c_vocab.h"
#include "util/mapped_file.h"

namespace pocket {

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

Vocab load_tokenizer_file(const std::string& path, int vocab_size, std::string* chat_template) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!json) return vocab_from_llama2c(path, vocab_size);
  std::string config = join_path(parent_dir(path), "tokenizer_config.json");
  return vocab_from_hf_json(path, file_exists(config) ? config : "", chat_template);
}

}  // namespace pocket
