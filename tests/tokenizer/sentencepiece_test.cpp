// SentencePiece-style BPE on the real llama2.c tokenizer (tok512.bin),
// checked against an independent transcription of llama2.c's encode():
// prepend a space, look each UTF-8 character up (else byte fallback, id =
// byte + 3), then repeatedly merge the adjacent pair whose concatenation is
// the best-scoring token (leftmost on ties).
#include <gtest/gtest.h>

#include <map>

#include "common/test_util.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"

namespace pocket {
namespace {

struct RefVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::map<std::string, int> lookup;  // normal pieces only (as SentencePiece: byte/control pieces are not text)
};

RefVocab ref_vocab(const Vocab& v) {
  RefVocab r{v.tokens, v.scores, {}};
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] == TokenType::Normal) r.lookup.emplace(v.tokens[i], static_cast<int>(i));
  return r;
}

std::vector<int32_t> llama2c_encode(const RefVocab& v, const std::string& text) {
  std::vector<int32_t> ids;
  if (text.empty()) return ids;
  const std::string s = " " + text;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    len = std::min(len, s.size() - i);
    auto it = v.lookup.find(s.substr(i, len));
    if (it != v.lookup.end()) {
      ids.push_back(it->second);
    } else {
      for (size_t k = 0; k < len; ++k) ids.push_back(static_cast<unsigned char>(s[i + k]) + 3);
    }
    i += len;
  }
  for (;;) {
    float best = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = v.lookup.find(v.pieces[ids[i]] + v.pieces[ids[i + 1]]);
      if (it != v.lookup.end() && v.scores[it->second] > best) {
        best = v.scores[it->second];
        best_id = it->second;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx < 0) break;
    ids[best_idx] = best_id;
    ids.erase(ids.begin() + best_idx + 1);
  }
  return ids;
}

class Tok512 : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = vocab_from_llama2c(test::stories_tokenizer(), 512);
    tok_ = Tokenizer::create(vocab_);
  }
  Vocab vocab_;
  std::shared_ptr<const Tokenizer> tok_;
};

TEST_F(Tok512, LoadsConventions) {
  EXPECT_EQ(tok_->vocab_size(), 512);
  EXPECT_EQ(vocab_.bos_id, 1);
  EXPECT_EQ(vocab_.eos_id, 2);
  EXPECT_EQ(vocab_.types[3 + 'A'], TokenType::Byte);
  EXPECT_EQ(tok_->token_bytes(3 + 0xE4), "\xE4");
  EXPECT_TRUE(tok_->is_eos(2));
}

TEST_F(Tok512, MatchesLlama2cReference) {
  const RefVocab ref = ref_vocab(vocab_);
  std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "She liked to play outside in the sun. One day, she saw a big, red ball!",
      "\"Hello,\" said Tom. \"Can I play too?\"",
      "  two leading spaces", "trailing space ", "tabs\tand\nnewlines\n\n", "12345 + 678 = 13023",
      "Ünïcödé and 中文 and emoji 😀 use byte fallback", "a", " ", "",
      "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
  };
  test::Rng rng(7);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz   ,.!?'\"ABCXYZ0123\n\xC3\xA9";
  for (int n = 0; n < 300; ++n) {  // random strings over a small alphabet (é kept whole)
    std::string s;
    const int len = 1 + static_cast<int>(rng.next() % 60);
    for (int k = 0; k < len; ++k) {
      const size_t pick = rng.next() % (alphabet.size() - 1);
      if (alphabet[pick] == '\xC3') s += "\xC3\xA9";
      else if (alphabet[pick] != '\xA9') s += alphabet[pick];
    }
    texts.push_back(s);
  }
  for (const auto& t : texts) {
    EXPECT_EQ(tok_->encode(t), llama2c_encode(ref, t)) << "\"" << t << "\"";
    // Decoding after BOS drops the prepended space, giving the text back.
    auto ids = tok_->encode(t, {.add_bos = true});
    if (!t.empty()) {
      ASSERT_EQ(ids[0], 1);
      EXPECT_EQ(tok_->decode(ids), "<s>" + t);
      EXPECT_EQ(tok_->decode(std::span(ids).subspan(1)), t);
    }
  }
}

TEST_F(Tok512, SpecialTokensOnlyWhenAllowed) {
  const auto plain = tok_->encode("a</s>b");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  const auto special = tok_->encode("a</s>b", {.allow_special = true});
  EXPECT_EQ(std::count(special.begin(), special.end(), 2), 1);
}

TEST_F(Tok512, InvalidUtf8UsesByteFallback) {
  const std::string bad = "ok\xFF\xC3(";
  const auto ids = tok_->encode(bad);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + 0xFF), ids.end());
  EXPECT_EQ(tok_->decode(ids), bad);
}

TEST_F(Tok512, BinaryFormRoundTrips) {
  const auto bin = tok_->serialize();
  auto back = Tokenizer::deserialize(bin.data(), bin.size());
  for (const char* t : {"Once upon a time", "Lily 😀 中"}) EXPECT_EQ(back->encode(t), tok_->encode(t));
  EXPECT_EQ(back->vocab().scores, vocab_.scores);
}

}  // namespace
}  // namespace pocket
