// Unicode helpers against hand-checked facts from the Unicode standard
// (UAX #15 examples, UnicodeData.txt categories). tools/tokenizer-oracle/
// check_nfc.cpp separately compares NFC with libutf8proc on every code point.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace pocket {
namespace {

using namespace unicode;

TEST(Unicode, Classes) {
  EXPECT_EQ(char_class('a'), kLetter);
  EXPECT_EQ(char_class(0x4E2D), kLetter);   // 中 Lo
  EXPECT_EQ(char_class(0x3042), kLetter);   // あ
  EXPECT_EQ(char_class(0x02B0), kLetter);   // ʰ Lm
  EXPECT_EQ(char_class('7'), kNumber);
  EXPECT_EQ(char_class(0x00BD), kNumber);   // ½ No
  EXPECT_EQ(char_class(0x216B), kNumber);   // Ⅻ Nl
  EXPECT_EQ(char_class(0xFF11), kNumber);   // full-width 1
  for (uint32_t ws : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    EXPECT_EQ(char_class(ws), kSpace) << std::hex << ws;
  EXPECT_EQ(char_class(0xFEFF), kOther);  // BOM is not White_Space (Rust \s), unlike JS \s
  EXPECT_EQ(char_class(0x200B), kOther);  // zero-width space is Cf
  EXPECT_EQ(char_class(0x0301), kOther);  // combining acute is Mn
  EXPECT_EQ(char_class(0x1F600), kOther); // emoji is So
  EXPECT_EQ(char_class(kInvalidBase + 0xFF), kOther);
}

// Letters and digits new in Unicode 15.0 are "other" to the pre-tokenizer,
// as to Hugging Face tokenizers' regex engine (Oniguruma 6.9.8: Unicode
// 14.0). The live oracle once drew U+1E4E0 and split differently.
TEST(Unicode, ClassesAreUnicode14sLikeHuggingFacesRegex) {
  EXPECT_EQ(char_class(0x1E4E0), kOther);   // Nag Mundari letter (15.0)
  EXPECT_EQ(char_class(0x1E4F0), kOther);   // Nag Mundari digit (15.0)
  EXPECT_EQ(char_class(0x11F04), kOther);   // Kawi letter (15.0)
  EXPECT_EQ(char_class(0x31350), kOther);   // CJK Extension H (15.0)
  EXPECT_EQ(char_class(0x2B739), kOther);   // CJK Extension C, added in 15.0
  EXPECT_EQ(char_class(0x2B738), kLetter);  // CJK Extension C, added in 14.0
  EXPECT_EQ(char_class(0x1E290), kLetter);  // Toto (14.0)
  EXPECT_EQ(char_class(0x0870), kLetter);   // Arabic (14.0)
  // Pre-tokens of "x" + cp + "y" under Qwen's pattern, as tokenizers 0.21.1
  // gives them: a 14.0 letter joins the word, a 15.0 one starts a new piece.
  auto pieces = [](uint32_t cp) {
    std::string s = "x";
    append_utf8(s, cp);
    s += "y";
    std::vector<uint32_t> ends;
    pretokenize(PreTokenizer::Qwen2, s, ends);
    return ends.size();
  };
  EXPECT_EQ(pieces(0x1E4E0), 2u);
  EXPECT_EQ(pieces(0x1E290), 1u);
  // Combining marks new in 15.0 are starters to tokenizers' NFC: nothing
  // reorders around U+1E4EE (class 220 in 15.0), so U+0301 after it does
  // not reach the a (outputs of tokenizers 0.21.1's NFC normalizer).
  EXPECT_EQ(nfc("a\xF0\x9E\x93\xAE\xCC\x81"), "a\xF0\x9E\x93\xAE\xCC\x81");
  EXPECT_EQ(nfc("a\xCC\x81\xF0\x9E\x93\xAE"), "\xC3\xA1\xF0\x9E\x93\xAE");
}

TEST(Unicode, DecodeRejectsMalformed) {
  size_t len;
  EXPECT_EQ(decode("\xE4\xB8\xAD", 0, len), 0x4E2Du);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(decode("\xC0\x80", 0, len), kInvalidBase + 0xC0);  // overlong
  EXPECT_EQ(decode("\xED\xA0\x80", 0, len), kInvalidBase + 0xED);  // surrogate
  EXPECT_EQ(decode("\xF4\x90\x80\x80", 0, len), kInvalidBase + 0xF4);  // > U+10FFFF
  EXPECT_EQ(decode("\xE4\xB8", 0, len), kInvalidBase + 0xE4);  // truncated
  EXPECT_EQ(len, 1u);
}

TEST(Unicode, CompleteUtf8Prefix) {
  size_t tail;
  EXPECT_EQ(complete_utf8_prefix("ab\xE4\xB8", &tail), 2u);
  EXPECT_EQ(tail, 2u);
  EXPECT_EQ(complete_utf8_prefix("ab\xE4\xB8\xAD", &tail), 5u);
  EXPECT_EQ(tail, 0u);
  EXPECT_EQ(complete_utf8_prefix("a\xFFz", &tail), 1u);  // invalid byte, not a tail
  EXPECT_EQ(tail, 0u);
  EXPECT_EQ(complete_utf8_prefix("a\xE0\x80", &tail), 1u);  // E0 80 can never be valid
  EXPECT_EQ(tail, 0u);
}

TEST(Unicode, NfcExamples) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                     // e + U+0301 -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                  // Å ANGSTROM SIGN -> Å (singleton)
  EXPECT_EQ(nfc("\xE2\x84\xA6"), "\xCE\xA9");                  // Ω OHM SIGN -> Ω
  EXPECT_EQ(nfc("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"), "\xED\x95\x9C");  // jamo -> 한
  EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");   // reorder: dot below (220) before dot above (230)
  EXPECT_EQ(nfc("\xE1\xB8\x8B\xCC\xA3"), "\xE1\xB8\x8D\xCC\x87");  // ḋ + dot below -> ḍ + dot above
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is a composition exclusion
  EXPECT_EQ(nfc("a\xFF\xCC\x81"), "a\xFF\xCC\x81");           // an invalid byte blocks composition
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_TRUE(nfc_quick_check("中文和English混合"));
  EXPECT_TRUE(nfc_quick_check("\xC3\xA9"));  // precomposed é is already NFC
  EXPECT_FALSE(nfc_quick_check("e\xCC\x81"));
}

// nfc() normalizes only the chunks around code points NFC may change; it
// must agree with the full algorithm over the whole text. The strings mix
// stable characters with everything that interacts across them: combining
// marks of different classes, characters that decompose and recompose,
// singletons, Hangul jamo and syllables, exclusions and invalid bytes.
TEST(Unicode, NfcChunksAgreeWithFullAlgorithm) {
  const std::vector<std::string> pieces = {
      "a", "e", "q", " ", "中", "\xC3\xA9", "\xE1\xB8\x8B", "\xCC\x81", "\xCC\x87", "\xCC\xA3", "\xCD\x85",
      "\xE2\x84\xAB", "\xE1\x84\x92", "\xE1\x85\xA1", "\xE1\x86\xAB", "\xED\x95\x98", "\xEA\xB0\x80",
      "\xE0\xA5\x98", "\xE0\xA4\xBC", "\xFF", "\xE4\xB8", "abcdefgh", "\xEF\xBC\x8C", "\xE3\x82\xAB",
      "\xE3\x82\x99"};
  test::Rng rng(7);
  size_t changed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string s;
    const size_t n = 1 + rng.next() % 24;
    for (size_t k = 0; k < n; ++k) s += pieces[rng.next() % pieces.size()];
    const std::string want = nfc_full(s);
    ASSERT_EQ(nfc(s), want) << "case " << iter;
    std::string storage;
    ASSERT_EQ(nfc(s, storage), want) << "case " << iter;
    changed += want != s;
  }
  EXPECT_GT(changed, 1000u);  // the strings do exercise normalization
}

TEST(PreTokenizer, RecognisesExactRegexes) {
  for (PreTokenizer k : {PreTokenizer::Qwen2, PreTokenizer::Llama3, PreTokenizer::GPT2})
    EXPECT_EQ(pretokenizer_from_regex(pretokenizer_regex(k)), k);
  EXPECT_FALSE(pretokenizer_from_regex("\\s+"));
}

std::vector<std::string> split(PreTokenizer k, const std::string& s) {
  std::vector<uint32_t> ends;
  pretokenize(k, s, ends);
  std::vector<std::string> out;
  uint32_t b = 0;
  for (uint32_t e : ends) {
    out.push_back(s.substr(b, e - b));
    b = e;
  }
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Qwen2Splits) {  // expectations worked out by hand from the regex
  const auto k = PreTokenizer::Qwen2;
  EXPECT_EQ(split(k, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'M 123"), (V{"I", "'M", " ", "1", "2", "3"}));
  EXPECT_EQ(split(k, "a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(split(k, "x  \n\n  y"), (V{"x", "  \n\n", " ", " y"}));
  EXPECT_EQ(split(k, "end   "), (V{"end", "   "}));
  EXPECT_EQ(split(k, "a, b!!\n"), (V{"a", ",", " b", "!!\n"}));
  EXPECT_EQ(split(k, "\tx"), (V{"\tx"}));
  EXPECT_EQ(split(k, "'\xC5\xBF"), (V{"'\xC5\xBF"}));  // Rust (?i) folds ſ to s
  EXPECT_EQ(split(k, "\xEF\xBB\xBFhi"), (V{"\xEF\xBB\xBFhi"}));  // BOM is not \s: it prefixes the word
  EXPECT_EQ(split(k, "a\xFF\xFE b"), (V{"a", "\xFF\xFE", " b"}));  // invalid bytes are symbols
}

TEST(PreTokenizer, Llama3AndGpt2Splits) {
  EXPECT_EQ(split(PreTokenizer::Llama3, "12345"), (V{"123", "45"}));
  EXPECT_EQ(split(PreTokenizer::GPT2, "It's 2024 yo!!"), (V{"It", "'s", " 2024", " yo", "!!"}));
  EXPECT_EQ(split(PreTokenizer::GPT2, "IT'S"), (V{"IT", "'", "S"}));  // case-sensitive contractions
  EXPECT_EQ(split(PreTokenizer::GPT2, "a \n b"), (V{"a", " \n", " b"}));
}

}  // namespace
}  // namespace pocket
