// fuzz_tokenize: text input to the tokenizers, as `pocket tokenize`, `pocket
// run -p` and chat messages give it: arbitrary bytes (invalid UTF-8
// included). Byte 0 holds options (bit 0 allow_special, bit 1 add_bos); the
// rest is the text. It is encoded with the real Qwen3 tokenizer (byte-level
// BPE: NFC, the Qwen2 pre-tokenizer scanner, merge loops, word cache, added
// tokens) and llama2.c's tok512 (SentencePiece BPE with byte fallback), both
// loaded once per process; the ids are decoded in full, token by token
// (token_bytes, display_piece) and by the streaming decoder. Checked (the
// contract in tokenizer.h): for the byte-level tokenizer
// NFC(decode(encode(s))) == NFC(s) for any byte string (added tokens are
// matched before NFC); the streaming decoder
// emits only valid UTF-8; for tok512, decode(encode(s)) == s when s has no
// "▁" (which decodes to a space), no NUL and is valid UTF-8 (both checks
// without BOS, whose text decode() emits).
#include "fuzz_util.h"
#include "tokenizer/unicode.h"

namespace {

bool valid_utf8(std::string_view s) {
  size_t tail = 0;
  return pocket::unicode::complete_utf8_prefix(s, &tail) == s.size();
}

// `normalize_back`: compare NFC(decode(...)) rather than decode(...) itself.
void check(const pocket::Tokenizer& tok, std::string_view text, const pocket::EncodeOptions& eo, const char* name,
           const std::string* expect, bool normalize_back = false) {
  using namespace pocket;
  const std::vector<int32_t> ids = tok.encode(text, eo);
  const std::string back = tok.decode(ids);
  if (expect && (normalize_back ? unicode::nfc(back) : back) != *expect)
    fuzz::finding(cat(name, ": decode(encode(text)) != expected text"));
  std::string streamed;
  StreamDecoder sd(tok);
  for (int32_t id : ids) {
    tok.token_bytes(id);
    display_piece(tok, id);
    streamed += sd.push(id);
  }
  streamed += sd.flush();
  if (!valid_utf8(streamed)) fuzz::finding(cat(name, ": the streaming decoder emitted invalid UTF-8"));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {  // the slow loads, outside the first input's time limit
  pocket::fuzz::qwen3_tokenizer();
  pocket::fuzz::tok512_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using namespace pocket::fuzz;
  const Tokenizer& qwen = qwen3_tokenizer();
  const Tokenizer& t512 = tok512_tokenizer();
  Bytes in(data, size);
  const uint8_t flags = in.take_byte();
  const std::string_view text = in.rest();
  EncodeOptions eo;
  eo.allow_special = flags & 1;
  eo.add_bos = flags & 2;
  const std::string nfc = unicode::nfc(text);
  // decode() emits a BOS token's text, so the round trip holds without one.
  const bool qwen_bos = eo.add_bos && qwen.vocab().bos_id >= 0;
  // The text is split at matched added tokens before NFC (as Hugging Face
  // does), so a combining mark right after "<|file_sep|>" stays a code point
  // of its own instead of composing with the ">" into U+226F: the decoded
  // text equals NFC(text) only after NFC itself.
  check(qwen, text, eo, "qwen3", qwen_bos ? nullptr : &nfc, true);
  const bool sp_round_trip = !eo.allow_special && !eo.add_bos && valid_utf8(text) &&
                             text.find("\xe2\x96\x81") == std::string_view::npos &&
                             text.find('\0') == std::string_view::npos;
  const std::string expect(text);
  check(t512, text, eo, "tok512", sp_round_trip ? &expect : nullptr);
  return 0;
}
