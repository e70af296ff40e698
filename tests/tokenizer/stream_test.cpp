// Streaming decode, special-token policy and invalid-UTF-8 behaviour on the
// real Qwen3 tokenizer.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace pocket {
namespace {

std::shared_ptr<const Tokenizer> qwen3() {
  static const auto tok = [] {
    const std::string dir = test::qwen3_tokenizer_dir();
    return Tokenizer::create(vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  }();
  return tok;
}

bool valid_utf8(const std::string& s) {
  size_t tail;
  return unicode::complete_utf8_prefix(s, &tail) == s.size();
}

TEST(StreamDecoder, EmitsOnlyCompleteUtf8) {
  auto tok = qwen3();
  size_t held_back = 0;  // pushes that emitted nothing because a character was incomplete
  for (const std::string text : {"今天天气很好，我们去公园散步吧。", "鳕鱼和鲟鱼 🐟🦈 👨‍👩‍👧‍👦 🇨🇳", "mixed 中文 text ✓ 𝔘𝔫𝔦"}) {
    const auto ids = tok->encode(text);
    StreamDecoder dec(*tok);
    std::string all;
    for (int32_t id : ids) {
      const std::string piece = dec.push(id);
      EXPECT_TRUE(valid_utf8(piece)) << "partial UTF-8 emitted for id " << id;
      held_back += piece.empty();
      all += piece;
    }
    all += dec.flush();
    EXPECT_EQ(all, tok->decode(ids));
    EXPECT_EQ(all, text);
  }
  EXPECT_GT(held_back, 0u) << "the texts should split some characters over several tokens";
}

TEST(StreamDecoder, FlushReplacesLeftovers) {
  auto tok = qwen3();
  const auto ids = tok->encode("\xE4\xB8");  // two bytes of 中 only
  StreamDecoder dec(*tok);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  EXPECT_EQ(out, "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.flush(), "");
}

TEST(Tokenizer, SpecialTokensArePlainTextByDefault) {
  auto tok = qwen3();
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto plain = tok->encode(text);
  for (int32_t id : plain) EXPECT_LT(id, 151643) << "special id " << id << " without allow_special";
  EXPECT_EQ(tok->decode(plain), text);
  const auto special = tok->encode(text, {.allow_special = true});
  EXPECT_EQ(special.front(), *tok->token_id("<|im_start|>"));
  EXPECT_EQ(special.back(), *tok->token_id("<|im_end|>"));
  EXPECT_TRUE(tok->is_eos(*tok->token_id("<|im_end|>")));
  EXPECT_TRUE(tok->is_eos(*tok->token_id("<|endoftext|>")));
  EXPECT_FALSE(tok->is_eos(*tok->token_id("<|im_start|>")));
  EXPECT_EQ(tok->token_bytes(*tok->token_id("<think>")), "<think>");
}

// Found by fuzz_tokenize (docs/reliability.md): the text is split at matched
// added tokens before NFC, as Hugging Face does (ids checked with tokenizers
// 0.21.1), so U+0338 after a matched "<|im_end|>" or "<|file_sep|>" (a
// user-defined token, matched in both modes) does not compose with the ">"
// into U+226F. Unmatched, "<|im_end|>" is text and is normalized with the rest.
TEST(Tokenizer, NfcDoesNotReachAcrossMatchedAddedTokens) {
  auto tok = qwen3();
  const std::string im_end = "<|im_end|>\xCC\xB8" "2";
  EXPECT_EQ(tok->encode(im_end, {.allow_special = true}), (std::vector<int32_t>{151645, 136, 116, 17}));
  EXPECT_EQ(tok->encode(im_end), (std::vector<int32_t>{27, 91, 318, 6213, 91, 58994, 107, 17}));
  EXPECT_EQ(tok->decode(tok->encode(im_end)), unicode::nfc(im_end));
  EXPECT_NE(unicode::nfc(im_end), im_end) << "\">\" + U+0338 should compose";
  const std::string file_sep = "<|file_sep|>\xCC\xB8" "2";
  const std::vector<int32_t> want = {151664, 136, 116, 17};
  EXPECT_EQ(tok->encode(file_sep), want);
  EXPECT_EQ(tok->encode(file_sep, {.allow_special = true}), want);
  EXPECT_EQ(tok->decode(want), file_sep);
}

TEST(Tokenizer, InvalidUtf8IsEncodedAsRawBytes) {
  auto tok = qwen3();
  for (const std::string& bad : {std::string("abc\xFF"), std::string("\xE4\xB8 x"), std::string("\xC0\x80\xED\xA0\x80"),
                                std::string("ok\x80\x80\x80 \xF0\x9F"), std::string("\0mid\0", 5)}) {
    const auto ids = tok->encode(bad);
    EXPECT_EQ(tok->decode(ids), bad);
  }
  // Every byte value alone round-trips.
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, static_cast<char>(b));
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  }
}

TEST(Tokenizer, RejectsBadIds) {
  auto tok = qwen3();
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{tok->vocab_size()}), Error);
  EXPECT_THROW(tok->token_bytes(1 << 30), Error);
  StreamDecoder dec(*tok);
  EXPECT_THROW(dec.push(-5), Error);
}

TEST(Tokenizer, DisplayPieceEscapes) {
  auto tok = qwen3();
  EXPECT_EQ(display_piece(*tok, tok->encode("\n")[0]), "\\n");
  EXPECT_EQ(display_piece(*tok, tok->encode(" hello")[0]), " hello");
  EXPECT_EQ(display_piece(*tok, *tok->token_id("<|im_end|>")), "<|im_end|>");
  const auto partial = tok->encode("\xE4");  // one byte of a 3-byte character
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(display_piece(*tok, partial[0]), "\\xE4");
}

TEST(Tokenizer, HfConfigFields) {
  const std::string dir = test::qwen3_tokenizer_dir();
  std::string tmpl;
  const Vocab v = vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", &tmpl);
  EXPECT_NE(tmpl.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(v.tokens.size(), 151669u);
  EXPECT_EQ(v.eos_id, 151645);
  EXPECT_EQ(v.pad_id, 151643);
  EXPECT_EQ(v.bos_id, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.nfc);
  EXPECT_EQ(v.pre, PreTokenizer::Qwen2);
  EXPECT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.types[151644], TokenType::Control);
  EXPECT_EQ(v.types[151667], TokenType::UserDefined);  // <think> is an added, non-special token
}

}  // namespace
}  // namespace pocket
