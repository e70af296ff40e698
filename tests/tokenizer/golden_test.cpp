// Parity with Hugging Face: every corpus string must encode to exactly the
// ids the HF tokenizer produced, with and without special-token matching,
// and decode back to HF's text. Two sources of truth:
//  - committed golden files (tests/data/tokenizer/golden_*.json), so machines
//    without Python packages still check parity;
//  - live cases from the real `tokenizers` library (Rust, from PyPI), made by
//    tools/oracles/tokenizer_cases.py in the test stage "oracles" with fresh
//    random strings each run: the TokenizerLive tests, skipped unless
//    POCKET_ORACLE_CASES names the folder holding them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_vocab.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

using json = nlohmann::json;

std::string data_path(const std::string& name) { return pocket::test::test_data_dir() + "/tokenizer/" + name; }

struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids, ids_plain;
  std::string decoded;
};

std::vector<GoldenCase> load_golden(const std::string& name) {
  const json corpus = json::parse(read_text_file(data_path("corpus.json")));
  const json golden = json::parse(read_text_file(data_path("golden_" + name + ".json")));
  EXPECT_EQ(corpus.size(), golden.size());
  std::vector<GoldenCase> cases;
  for (size_t i = 0; i < corpus.size() && i < golden.size(); ++i) {
    GoldenCase c;
    c.text = corpus[i].get<std::string>();
    c.ids = golden[i]["ids"].get<std::vector<int32_t>>();
    c.ids_plain = golden[i]["ids_plain"].is_null() ? c.ids : golden[i]["ids_plain"].get<std::vector<int32_t>>();
    c.decoded = golden[i]["decoded"].get<std::string>();
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Compares all cases; reports the first few differences and the match rate.
void expect_parity(const Tokenizer& tok, const std::vector<GoldenCase>& cases, const std::string& name) {
  size_t bad_special = 0, bad_plain = 0, bad_decode = 0, bad_roundtrip = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const GoldenCase& c = cases[i];
    const auto ids = tok.encode(c.text, {.allow_special = true});
    if (ids != c.ids && ++bad_special <= 5)
      ADD_FAILURE() << name << " case " << i << " (allow_special) \"" << c.text << "\"\n  want " << show(c.ids)
                    << "\n  got  " << show(ids);
    const auto plain = tok.encode(c.text);
    if (plain != c.ids_plain && ++bad_plain <= 5)
      ADD_FAILURE() << name << " case " << i << " (plain) \"" << c.text << "\"\n  want " << show(c.ids_plain)
                    << "\n  got  " << show(plain);
    if (tok.decode(c.ids) != c.decoded && ++bad_decode <= 5)
      ADD_FAILURE() << name << " case " << i << " decode: want \"" << c.decoded << "\" got \"" << tok.decode(c.ids)
                    << "\"";
    // Byte-level BPE is lossless up to normalization; SentencePiece reads a
    // literal U+2581 as the space it stands for.
    std::string expect_text = tok.vocab().nfc ? unicode::nfc(c.text) : c.text;
    if (tok.vocab().kind == TokenizerKind::SentencePieceBPE)
      for (size_t at; (at = expect_text.find("\xE2\x96\x81")) != std::string::npos;) expect_text.replace(at, 3, " ");
    if (tok.decode(plain) != expect_text && ++bad_roundtrip <= 5)
      ADD_FAILURE() << name << " case " << i << " round trip of \"" << c.text << "\" gave \"" << tok.decode(plain)
                    << "\"";
  }
  EXPECT_EQ(bad_special, 0u) << name << ": " << bad_special << "/" << cases.size() << " differ (allow_special)";
  EXPECT_EQ(bad_plain, 0u) << name << ": " << bad_plain << "/" << cases.size() << " differ (plain)";
  EXPECT_EQ(bad_decode, 0u) << name << ": " << bad_decode << "/" << cases.size() << " decodes differ";
  EXPECT_EQ(bad_roundtrip, 0u) << name << ": " << bad_roundtrip << "/" << cases.size() << " round trips differ";
}

// A case file written by tools/oracles/tokenizer_cases.py, or an empty list
// (and a skip) when the stage that makes them did not run.
std::vector<GoldenCase> load_live(const std::string& name, std::string* about) {
  const char* dir = std::getenv("POCKET_ORACLE_CASES");
  if (!dir || !*dir) return {};
  const json doc = json::parse(read_text_file(std::string(dir) + "/" + name + ".json"));
  *about = "tokenizers " + doc["tokenizers"].get<std::string>() + ", seed " + std::to_string(doc["seed"].get<int64_t>());
  std::vector<GoldenCase> cases;
  for (const json& c : doc["cases"]) {
    GoldenCase g;
    g.text = c["text"].get<std::string>();
    g.ids = c["ids"].get<std::vector<int32_t>>();
    g.ids_plain = c["ids_plain"].get<std::vector<int32_t>>();
    g.decoded = c["decoded"].get<std::string>();
    cases.push_back(std::move(g));
  }
  return cases;
}

void expect_live_parity(const Tokenizer& tok, const std::string& name) {
  std::string about;
  const auto cases = load_live(name, &about);
  if (cases.empty()) GTEST_SKIP() << "POCKET_ORACLE_CASES not set (test.sh stage \"oracles\" makes the cases)";
  EXPECT_GE(cases.size(), 1000u);
  expect_parity(tok, cases, name + " live (" + about + ")");
}

TEST(TokenizerLive, Qwen3MatchesHuggingFaceTokenizers) {
  const std::string dir = test::qwen3_tokenizer_dir();
  auto tok = Tokenizer::create(vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  expect_live_parity(*tok, "qwen3");
}

// A vocabulary pruned by `pocket prune-vocab` (scripts/oracles.sh writes it
// to POCKET_ORACLE_CASES/qwen3_pruned/, and the cases include the whole
// held-out corpus): the real library loads it and agrees with Pocket.
TEST(TokenizerLive, PrunedQwen3MatchesHuggingFaceTokenizers) {
  const char* dir = std::getenv("POCKET_ORACLE_CASES");
  const std::string pruned = dir && *dir ? std::string(dir) + "/qwen3_pruned" : "";
  if (pruned.empty() || !file_exists(pruned + "/tokenizer.json"))
    GTEST_SKIP() << "no pruned vocabulary in POCKET_ORACLE_CASES (test.sh stage \"oracles\" makes it)";
  auto tok = Tokenizer::create(
      vocab_from_hf_json(pruned + "/tokenizer.json", pruned + "/tokenizer_config.json", nullptr));
  EXPECT_LT(tok->vocab_size(), 151669);
  expect_live_parity(*tok, "qwen3_pruned");
}

TEST(TokenizerLive, Gpt2StyleMatchesHuggingFaceTokenizers) {
  expect_live_parity(*Tokenizer::create(vocab_from_hf_json(data_path("gpt2_small/tokenizer.json"), "", nullptr)),
                     "gpt2_small");
}

TEST(TokenizerLive, Llama3StyleMatchesHuggingFaceTokenizers) {
  expect_live_parity(*Tokenizer::create(vocab_from_hf_json(data_path("llama3_small/tokenizer.json"), "", nullptr)),
                     "llama3_small");
}

// Gemma 3's SentencePiece BPE vocabulary (262,144 entries, byte fallback,
// user-defined whitespace and markup pieces) read from the real GGUF,
// against Hugging Face's Gemma tokenizer that transformers' converter builds
// from the same vocabulary (tools/oracles/gemma3_tokenizer.py), on the
// shared Chinese and English held-out text and random strings.
TEST(TokenizerLive, Gemma3MatchesTransformersGemmaTokenizer) {
  POCKET_NEED_GEMMA3(path);
  const GgufFile g = GgufFile::parse(MappedFile::open(path));
  expect_live_parity(*Tokenizer::create(vocab_from_gguf(g)), "gemma3");
}

TEST(TokenizerGolden, CorpusIsLargeAndVaried) {
  const auto cases = load_golden("qwen3");
  EXPECT_GE(cases.size(), 1000u);
  size_t with_special = 0;
  for (const auto& c : cases) with_special += c.ids != c.ids_plain;
  EXPECT_GE(with_special, 10u);  // special tokens inside text are covered both ways
}

TEST(TokenizerGolden, Qwen3MatchesHuggingFace) {
  const std::string dir = test::qwen3_tokenizer_dir();
  auto tok = Tokenizer::create(vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  expect_parity(*tok, load_golden("qwen3"), "qwen3");
}

TEST(TokenizerGolden, Qwen3BinaryFormMatchesHuggingFace) {
  const std::string dir = test::qwen3_tokenizer_dir();
  auto tok = Tokenizer::create(vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  const auto bin = tok->serialize();
  auto back = Tokenizer::deserialize(bin.data(), bin.size());
  expect_parity(*back, load_golden("qwen3"), "qwen3 (binary form)");
  EXPECT_EQ(back->vocab().eos_ids, tok->vocab().eos_ids);
  EXPECT_EQ(back->serialize(), bin);
}

TEST(TokenizerGolden, Gpt2StyleMatchesHuggingFace) {
  auto tok = Tokenizer::create(vocab_from_hf_json(data_path("gpt2_small/tokenizer.json"), "", nullptr));
  EXPECT_EQ(tok->vocab().pre, PreTokenizer::GPT2);
  EXPECT_FALSE(tok->vocab().nfc);
  expect_parity(*tok, load_golden("gpt2_small"), "gpt2_small");
}

TEST(TokenizerGolden, Llama3StyleMatchesHuggingFace) {
  auto tok = Tokenizer::create(vocab_from_hf_json(data_path("llama3_small/tokenizer.json"), "", nullptr));
  EXPECT_EQ(tok->vocab().pre, PreTokenizer::Llama3);
  EXPECT_TRUE(tok->vocab().ignore_merges);
  expect_parity(*tok, load_golden("llama3_small"), "llama3_small");
}

}  // namespace
}  // namespace pocket
