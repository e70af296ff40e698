#include "formats/gguf_vocab.h"

#include <algorithm>

#include "util/error.h"

namespace pocket {

namespace {

// GGUF token_type values (llama.cpp's llama_token_type).
TokenType token_type_from_gguf(int64_t t, const GgufFile& g, size_t index) {
  switch (t) {
    case 0:  // undefined
    case 1:
      return TokenType::Normal;
    case 2:
      return TokenType::Unknown;
    case 3:
      return TokenType::Control;
    case 4:
      return TokenType::UserDefined;
    case 5:
      return TokenType::Unused;
    case 6:
      return TokenType::Byte;
    default:
      fail(g.path(), ": tokenizer.ggml.token_type[", index, "] = ", t, " is not a known token type");
  }
}

PreTokenizer pre_tokenizer_from_gguf(const GgufFile& g, bool* nfc) {
  auto pre = g.get_string("tokenizer.ggml.pre");
  *nfc = false;
  if (!pre || *pre == "gpt-2" || *pre == "default") return PreTokenizer::GPT2;
  if (*pre == "qwen2") {
    *nfc = true;
    return PreTokenizer::Qwen2;
  }
  if (*pre == "llama-bpe" || *pre == "llama3") return PreTokenizer::Llama3;
  fail(g.path(), ": unsupported tokenizer.ggml.pre '", *pre, "' (supported: qwen2, llama-bpe, llama3, gpt-2, default)");
}

// A special-token id, or -1 for "none". llama.cpp's converters write -1
// (as 0xFFFFFFFF in a uint32 field) for a token the model does not have, so
// an id outside the vocabulary means "none", with a note, not a bad file.
int32_t token_id(const GgufFile& g, const std::string& key, size_t n_tokens, int32_t dflt,
                 std::vector<std::string>* notes) {
  auto v = g.get_int(key);
  if (!v) return dflt < static_cast<int64_t>(n_tokens) ? dflt : -1;
  if (*v < 0 || *v >= static_cast<int64_t>(n_tokens)) {
    const bool minus_one = *v == -1 || *v == 0xFFFFFFFFll;
    if (notes && !minus_one)
      notes->push_back(key + " = " + std::to_string(*v) + " is outside the vocabulary (" + std::to_string(n_tokens) +
                       " tokens); treated as none");
    return -1;
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

std::vector<int32_t> collect_eos_ids(const Vocab& v, const std::vector<int32_t>& extra) {
  std::vector<int32_t> ids = v.eos_ids;
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(v.eos_id);
  for (int32_t id : extra) add(id);
  static constexpr std::string_view kEndTokens[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                                    "<|end_of_text|>", "<|eom_id|>", "<end_of_turn>"};
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types.size() == v.tokens.size() && v.types[i] != TokenType::Control) continue;
    if (std::find(std::begin(kEndTokens), std::end(kEndTokens), v.tokens[i]) != std::end(kEndTokens))
      add(static_cast<int32_t>(i));
  }
  return ids;
}

Vocab vocab_from_gguf(const GgufFile& g, std::vector<std::string>* notes) {
  Vocab v;
  auto model = g.get_string("tokenizer.ggml.model");
  if (!model) fail(g.path(), ": tokenizer metadata 'tokenizer.ggml.model' is missing");

  auto tokens = g.get_string_array("tokenizer.ggml.tokens", true);
  if (tokens.empty()) fail(g.path(), ": tokenizer.ggml.tokens is empty");
  v.tokens.assign(tokens.begin(), tokens.end());
  const size_t n = v.tokens.size();

  auto types = g.get_int_array("tokenizer.ggml.token_type", false);
  if (!types.empty() && types.size() != n)
    fail(g.path(), ": tokenizer.ggml.token_type has ", types.size(), " entries for ", n, " tokens");
  v.types.resize(n, TokenType::Normal);
  for (size_t i = 0; i < types.size(); ++i) v.types[i] = token_type_from_gguf(types[i], g, i);

  if (*model == "gpt2") {
    v.kind = TokenizerKind::ByteLevelBPE;
    v.pre = pre_tokenizer_from_gguf(g, &v.nfc);
    auto merges = g.get_string_array("tokenizer.ggml.merges", true);
    v.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      // Byte-level pieces never hold a literal space, so the first one splits the pair.
      auto sp = merges[i].find(' ');
      if (sp == std::string_view::npos || sp == 0 || sp + 1 == merges[i].size())
        fail(g.path(), ": tokenizer.ggml.merges[", i, "] = '", merges[i], "' is not of the form 'a b'");
      v.merges.emplace_back(std::string(merges[i].substr(0, sp)), std::string(merges[i].substr(sp + 1)));
    }
    v.add_bos = g.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
    v.add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix").value_or(false);
  } else if (*model == "llama") {
    v.kind = TokenizerKind::SentencePieceBPE;
    v.scores = g.get_float_array("tokenizer.ggml.scores", true);
    if (v.scores.size() != n)
      fail(g.path(), ": tokenizer.ggml.scores has ", v.scores.size(), " entries for ", n, " tokens");
    v.add_bos = g.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
    v.add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  } else {
    fail(g.path(), ": unsupported tokenizer.ggml.model '", *model, "' (supported: gpt2, llama)");
  }

  // SentencePiece models conventionally use <unk>=0, <s>=1, </s>=2.
  const bool sp = v.kind == TokenizerKind::SentencePieceBPE;
  v.bos_id = token_id(g, "tokenizer.ggml.bos_token_id", n, sp ? 1 : -1, notes);
  v.eos_id = token_id(g, "tokenizer.ggml.eos_token_id", n, sp ? 2 : -1, notes);
  v.unk_id = token_id(g, "tokenizer.ggml.unknown_token_id", n, sp ? 0 : -1, notes);
  v.pad_id = token_id(g, "tokenizer.ggml.padding_token_id", n, -1, notes);
  std::vector<int32_t> extra;
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (int32_t id = token_id(g, key, n, -1, notes); id >= 0) extra.push_back(id);
  v.eos_ids = collect_eos_ids(v, extra);
  // The cases where a missing id changes behaviour.
  if (notes) {
    if (v.add_bos && v.bos_id < 0)
      notes->push_back("tokenizer.ggml.add_bos_token is set but the file names no BOS token; none is added");
    if (v.eos_ids.empty())
      notes->push_back("no end-of-sequence token: generation stops only at the token limit");
  }
  return v;
}

}  // namespace pocket
