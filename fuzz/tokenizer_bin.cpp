// fuzz_tokenizer_bin: the input is Pocket's compact binary tokenizer (magic
// "PKTK", the form stored in a Pocket file's pocket.tokenizer array), given to
// Tokenizer::deserialize exactly as the Pocket-file reader (gguf_model.cpp)
// gives it the array's bytes: header, kind/flags, token table, types,
// scores, merge id triples (verified, not trusted), special ids. A tokenizer
// that loads is used like the CLI uses it (encode/decode of sample text with
// its own control tokens, streaming decode) and must survive
// serialize -> deserialize with identical encodings.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using namespace pocket::fuzz;
  std::shared_ptr<const Tokenizer> tok;
  if (!guarded([&] { tok = Tokenizer::deserialize(data, size); })) return 0;
  std::string text = "Once upon a time, 你好 123 \xe2\x96\x81x \xc3\x28 it's\n";
  const Vocab& v = tok->vocab();
  for (size_t i = 0, added = 0; i < v.tokens.size() && added < 4; ++i)
    if (v.types[i] == TokenType::Control || v.types[i] == TokenType::UserDefined) {
      text += v.tokens[i] + "y";
      ++added;
    }
  std::vector<uint8_t> again = tok->serialize();
  std::shared_ptr<const Tokenizer> tok2 = Tokenizer::deserialize(again.data(), again.size());  // must not throw
  for (bool special : {false, true}) {
    EncodeOptions eo;
    eo.allow_special = special;
    eo.add_bos = special;
    std::vector<int32_t> ids = tok->encode(text, eo);
    if (tok2->encode(text, eo) != ids) finding("encode differs after serialize -> deserialize");
    if (tok->decode(ids) != tok2->decode(ids)) finding("decode differs after serialize -> deserialize");
    StreamDecoder sd(*tok);
    for (int32_t id : ids) sd.push(id);
    sd.flush();
    for (int32_t id : ids) display_piece(*tok, id);
  }
  return 0;
}
