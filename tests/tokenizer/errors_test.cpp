// Bad tokenizer files: each must give one clear pocket::Error that names the
// problem, never a crash (these run under ASan/UBSan in the sanitizer build).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

using json = nlohmann::json;

const json& small_tokenizer() {
  static const json j =
      json::parse(read_text_file(pocket::test::gpt2_small_tokenizer()));
  return j;
}

// Expects loading `j` (+ optional config) to fail with a message containing `needle`.
void expect_json_error(const json& j, const std::string& needle, const std::string& config = "") {
  try {
    Tokenizer::create(vocab_from_hf_json_text(j.dump(), config, "bad.json", nullptr));
    ADD_FAILURE() << "no error; wanted one mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << "error should name the file: " << e.what();
  }
}

TEST(TokenizerErrors, HfJson) {
  expect_json_error(json::array(), "not an object");
  try {
    vocab_from_hf_json_text("{ not json", "", "bad.json", nullptr);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos);
  }
  json j = small_tokenizer();
  j.erase("model");
  expect_json_error(j, "model");

  j = small_tokenizer();
  j["model"]["type"] = "Unigram";
  expect_json_error(j, "unsupported model type \"Unigram\"");

  j = small_tokenizer();
  j["model"].erase("merges");
  expect_json_error(j, "model.merges");

  j = small_tokenizer();
  j["model"]["merges"].push_back("Ġ nosuchtoken");
  expect_json_error(j, "refers to a token not in the vocab");

  j = small_tokenizer();
  j["model"]["merges"][3] = "nospace";
  expect_json_error(j, "model.merges[3]");

  j = small_tokenizer();
  j["model"]["vocab"]["Ġhuge"] = 2000000000;
  expect_json_error(j, "out of range");

  j = small_tokenizer();
  j["model"]["vocab"]["dup"] = 5;
  expect_json_error(j, "used twice");

  j = small_tokenizer();
  j["model"]["vocab"]["日本"] = j["model"]["vocab"].size() + 5;  // not in the byte-level alphabet
  expect_json_error(j, "outside the byte-level alphabet");

  j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
                                           {{"type", "ByteLevel"}, {"use_regex", false}, {"add_prefix_space", false}}}}};
  expect_json_error(j, "unsupported pre-tokenizer regex");

  j = small_tokenizer();
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_json_error(j, "unsupported pre-tokenizer \"Metaspace\"");

  j = small_tokenizer();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_json_error(j, "unsupported normalizer \"Lowercase\"");

  j = small_tokenizer();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_json_error(j, "unsupported decoder");

  j = small_tokenizer();
  j["added_tokens"][0]["lstrip"] = true;
  expect_json_error(j, "lstrip");

  j = small_tokenizer();
  j["model"]["byte_fallback"] = true;
  expect_json_error(j, "byte_fallback");

  expect_json_error(small_tokenizer(), "not in the vocabulary", R"({"eos_token": "<nope>"})");
  expect_json_error(small_tokenizer(), "invalid JSON", "{");
}

TEST(TokenizerErrors, MissingFile) {
  EXPECT_THROW(vocab_from_hf_json("/nonexistent/tokenizer.json", "", nullptr), Error);
  EXPECT_THROW(vocab_from_llama2c("/nonexistent/tok.bin", 512), Error);
}

TEST(TokenizerErrors, BadVocab) {
  Vocab v;
  EXPECT_THROW(Tokenizer::create(v), Error);  // empty
  v.tokens = {"a", "b"};
  v.types = {TokenType::Normal};
  EXPECT_THROW(Tokenizer::create(v), Error);  // types size
  v.types = {TokenType::Normal, TokenType::Normal};
  EXPECT_THROW(Tokenizer::create(v), Error);  // byte-level without the 256 byte tokens
  v.kind = TokenizerKind::SentencePieceBPE;
  v.scores = {0, 0};
  EXPECT_THROW(Tokenizer::create(v), Error);  // neither unk nor byte fallback
  v.unk_id = 0;
  EXPECT_NO_THROW(Tokenizer::create(v));
  v.eos_ids = {7};
  EXPECT_THROW(Tokenizer::create(v), Error);  // eos out of range
}

TEST(TokenizerErrors, Llama2cTruncatedAndAbsurd) {
  const auto file = MappedFile::open(test::stories_tokenizer());
  EXPECT_THROW(vocab_from_llama2c_bytes(file->data(), file->size(), 1 << 30, "tok.bin"), Error);
  EXPECT_THROW(vocab_from_llama2c_bytes(file->data(), file->size(), -3, "tok.bin"), Error);
  for (size_t cut = 0; cut < file->size(); cut += 7) {
    try {
      vocab_from_llama2c_bytes(file->data(), cut, 512, "tok.bin");
      ADD_FAILURE() << "truncation at " << cut << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tok.bin"), std::string::npos);
    }
  }
}

// Truncating the binary form anywhere must fail cleanly; flipping bytes must
// fail cleanly or give a tokenizer that still works.
void check_binary_robustness(const Tokenizer& tok, size_t stride) {
  const auto bin = tok.serialize();
  for (size_t cut = 0; cut < bin.size(); cut += stride) {
    std::vector<uint8_t> part(bin.begin(), bin.begin() + cut);  // own buffer: ASan sees overreads
    EXPECT_THROW(Tokenizer::deserialize(part.data(), part.size()), Error) << "cut at " << cut;
  }
  test::Rng rng(3);
  for (int k = 0; k < 200; ++k) {
    auto bad = bin;
    bad[rng.next() % bad.size()] ^= static_cast<uint8_t>(1 + rng.next() % 255);
    try {
      auto t = Tokenizer::deserialize(bad.data(), bad.size());
      t->decode(t->encode("Hello 世界 <|endoftext|> 123", {.allow_special = true}));
    } catch (const Error&) {
    }
  }
}

TEST(TokenizerErrors, BinaryFormTruncatedAtEveryOffset) {
  auto small = Tokenizer::create(
      vocab_from_hf_json(pocket::test::test_data_dir() + "/tokenizer/llama3_small/tokenizer.json", "", nullptr));
  check_binary_robustness(*small, 1);
  auto tok512 = Tokenizer::create(vocab_from_llama2c(test::stories_tokenizer(), 512));
  check_binary_robustness(*tok512, 1);
  const uint8_t junk[] = {'P', 'K', 'T', 'K', 9, 0, 0, 0};
  EXPECT_THROW(Tokenizer::deserialize(junk, sizeof junk), Error);
  EXPECT_THROW(Tokenizer::deserialize(nullptr, 0), Error);
}

// Found by fuzz_gguf (fuzz/, docs/reliability.md): a binary form whose eos
// list (or token table) is empty passed a null pointer to memcpy (UB, a UBSan
// report) before any check could reject it.
TEST(TokenizerErrors, BinaryFormWithEmptyArrays) {
  Vocab v = vocab_from_hf_json(pocket::test::gpt2_small_tokenizer(), "", nullptr);
  v.eos_ids.clear();
  auto tok = Tokenizer::create(v);
  const std::vector<uint8_t> blob = tok->serialize();
  auto back = Tokenizer::deserialize(blob.data(), blob.size());
  EXPECT_EQ(back->encode("Hello world"), tok->encode("Hello world"));
  // "PKTK" v1, byte-level, no scores, no special ids, 0 tokens, 0 eos ids,
  // empty pool, 0 merges: every array is empty; create() must reject it.
  const uint8_t empty[] = {'P', 'K', 'T', 'K', 1, 0, 0, 0, 0, 0, 0, 0,          // magic, version, kind..has_scores
                           0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,       // bos, eos = -1
                           0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,       // pad, unk = -1
                           0, 0, 0, 0, 0, 0, 0, 0,                               // 0 tokens, 0 eos ids
                           0, 0, 0, 0, 0, 0, 0, 0,                               // pool size 0
                           0, 0, 0, 0};                                          // 0 merges
  EXPECT_THROW(Tokenizer::deserialize(empty, sizeof empty), Error);
}

}  // namespace
}  // namespace pocket
