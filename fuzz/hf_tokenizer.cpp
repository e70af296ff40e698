// fuzz_hf_tokenizer: the input is a Hugging Face tokenizer.json and
// tokenizer_config.json, split at the separator line of fuzz_util.h (part 1
// left out when empty), written to the scratch directory and loaded as
// `pocket tokenize -m tokenizer.json` and the HF-folder loader do:
// vocab_from_hf_json (model BPE byte-level / SentencePiece with byte_fallback,
// vocab, merges in both the "a b" and ["a","b"] forms, added_tokens,
// normalizer, pre_tokenizer regex, decoder; eos/bos/pad tokens, add_bos_token
// and chat_template from the config), then Tokenizer::create, chat-format
// detection on the config's template, and encode/decode of sample text with
// and without special-token matching.
#include "fuzz_util.h"
#include "tokenizer/hf_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using namespace pocket::fuzz;
  static const std::string json = scratch_path("hftok", "tokenizer.json");
  static const std::string config = scratch_path("hftok", "tokenizer_config.json");
  const std::vector<std::string_view> parts = split_parts(data, size, 2);
  write_file(json, parts[0]);
  remove_file(config);
  if (!parts[1].empty()) write_file(config, parts[1]);
  guarded([&] {
    std::string chat_template;
    auto tok = Tokenizer::create(vocab_from_hf_json(json, parts[1].empty() ? "" : config, &chat_template));
    detect_chat_format(chat_template, *tok);
    std::string text = "Hello world! 你好，世界 123 \xff\xfe it's\r\n\t  done";
    const Vocab& v = tok->vocab();
    for (size_t i = 0, added = 0; i < v.tokens.size() && added < 4; ++i)
      if (v.types[i] == TokenType::Control || v.types[i] == TokenType::UserDefined) {
        text += v.tokens[i] + "x";
        ++added;
      }
    for (bool special : {false, true}) {
      EncodeOptions eo;
      eo.allow_special = special;
      eo.add_bos = special;
      std::vector<int32_t> ids = tok->encode(text, eo);
      tok->decode(ids);
      StreamDecoder sd(*tok);
      for (int32_t id : ids) sd.push(id);
      sd.flush();
    }
  });
  return 0;
}
