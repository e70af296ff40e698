// The real Qwen3 tokenizer from shared/, loaded once per test binary.
#pragma once
#include <memory>

#include "common/test_util.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"

namespace pocket::test {

inline std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static auto tok = [] {
    std::string dir = qwen3_tokenizer_dir();
    return Tokenizer::create(vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  }();
  return tok;
}

}  // namespace pocket::test
