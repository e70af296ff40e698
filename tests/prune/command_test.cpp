// prune_vocab() end to end on tokenizer files: what it writes (tokenizer.json,
// tokenizer_config.json, the id map, the report), that the files load back
// as the pruned vocabulary, and that bad input is a clear error that never
// touches IN.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "generate/chat.h"
#include "prune/prune.h"
#include "prune/prune_fixture.h"
#include "tokenizer/hf_json.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;


void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The error message of fn(), or "" if it did not throw.
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PruneCommand, TokenizerFolderWritesFilesThatLoadAsThePrunedVocabulary) {
  test::TempDir dir;
  const std::string in = test::qwen3_tokenizer_dir(), out = dir.file("qwen3-20k");
  prune::PruneOptions o;
  o.keep = 20000;
  o.corpus = {test::corpus_file("train_en")};
  o.heldout = {test::corpus_file("heldout_en")};
  o.threads = 2;
  const auto r = prune::prune_vocab(in, out, o);
  EXPECT_EQ(r.vocab_after, 20000);
  EXPECT_EQ(r.vocab_before, 151669);
  ASSERT_EQ(r.heldout.size(), 1u);
  EXPECT_EQ(r.heldout[0].stats.docs_all_kept_identical, r.heldout[0].stats.docs_all_kept);
  EXPECT_GT(r.heldout[0].stats.docs_all_kept, 0u);
  EXPECT_NE(r.markdown().find("tokens/char"), std::string::npos);
  EXPECT_EQ(json::parse(r.json())["vocab_after"].get<int64_t>(), 20000);

  std::string tmpl_before, tmpl_after;
  const Vocab before = vocab_from_hf_json(in + "/tokenizer.json", in + "/tokenizer_config.json", &tmpl_before);
  const Vocab after = vocab_from_hf_json(out + "/tokenizer.json", out + "/tokenizer_config.json", &tmpl_after);
  EXPECT_EQ(tmpl_after, tmpl_before);
  const json map = json::parse(read_text_file(out + "/vocab_map.json"));
  const auto new_to_old = map["new_to_old"].get<std::vector<int32_t>>();
  const auto old_to_new = map["old_to_new"].get<std::vector<int32_t>>();
  ASSERT_EQ(new_to_old.size(), after.tokens.size());
  ASSERT_EQ(old_to_new.size(), before.tokens.size());
  for (size_t n = 0; n < new_to_old.size(); ++n) {
    EXPECT_EQ(after.tokens[n], before.tokens[new_to_old[n]]);
    EXPECT_EQ(after.types[n], before.types[new_to_old[n]]);
    EXPECT_EQ(old_to_new[new_to_old[n]], static_cast<int32_t>(n));
  }
  // Merges: exactly the original ones whose parts and result are kept.
  std::set<std::string> kept;
  for (const auto& t : after.tokens) kept.insert(t);
  std::vector<std::pair<std::string, std::string>> expect;
  for (const auto& m : before.merges)
    if (kept.count(m.first) && kept.count(m.second) && kept.count(m.first + m.second)) expect.push_back(m);
  EXPECT_EQ(after.merges, expect);
  EXPECT_EQ(after.eos_id, old_to_new[before.eos_id]);
  EXPECT_EQ(after.pad_id, old_to_new[before.pad_id]);
  // tokenizer_config.json's added_tokens_decoder is keyed by the new ids.
  const json cfg = json::parse(read_text_file(out + "/tokenizer_config.json"));
  for (const auto& [key, value] : cfg["added_tokens_decoder"].items())
    EXPECT_EQ(after.tokens[std::stoul(key)], value["content"].get<std::string>());
  // The input is untouched, the tokenizer works, the chat template is found.
  auto tok = Tokenizer::create(after);
  EXPECT_EQ(detect_chat_format(tmpl_after, *tok), ChatFormat::Qwen3);
  EXPECT_EQ(tok->decode(tok->encode("Hello, 世界! 🙂")), "Hello, 世界! 🙂");
}

TEST(PruneCommand, ATokenizerFileGivesAFileAndAMapBesideIt) {
  test::TempDir dir;
  write(dir.file("corpus.txt"), "hello world\nthe the the\n");
  write(dir.file("keep.txt"), "Ġworld\nzebra crossing\n");
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("corpus.txt")};
  o.keep_tokens = dir.file("keep.txt");
  o.min_count = 1;
  const auto r = prune::prune_vocab(test::gpt2_small_tokenizer(), dir.file("small.json"), o);
  EXPECT_EQ(r.map_path, dir.file("small.vocab_map.json"));
  EXPECT_TRUE(fs::exists(r.map_path));
  const Vocab before = vocab_from_hf_json(test::gpt2_small_tokenizer(), "", nullptr);
  const Vocab after = vocab_from_hf_json(dir.file("small.json"), "", nullptr);
  EXPECT_EQ(static_cast<int64_t>(after.tokens.size()), r.vocab_after);
  EXPECT_LT(after.tokens.size(), 400u);  // --min-count 1: only what the corpus and the keep list use
  auto b = Tokenizer::create(before), a = Tokenizer::create(after);
  const json map = json::parse(read_text_file(r.map_path));
  const auto old_to_new = map["old_to_new"].get<std::vector<int32_t>>();
  for (const char* text : {"hello world", "the the", " world", "zebra crossing"}) {
    std::vector<int32_t> expect;
    for (int32_t id : b->encode(text)) expect.push_back(old_to_new[id]);
    EXPECT_EQ(a->encode(text), expect) << text;
  }
}

TEST(PruneCommand, NeverOverwritesTheInput) {
  test::TempDir dir;
  write(dir.file("corpus.txt"), "hello\n");
  fs::copy_file(test::gpt2_small_tokenizer(), dir.file("tokenizer.json"));
  const std::string original = read_text_file(dir.file("tokenizer.json"));
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("corpus.txt")};
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("tokenizer.json"), dir.file("tokenizer.json"), o); })
                .find("never overwrites"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("tokenizer.json"), dir.path() + "/./tokenizer.json", o); })
                .find("never overwrites"),
            std::string::npos);
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.path(), dir.path(), o); }).find("never overwrites"), std::string::npos);
  o.map_path = dir.file("tokenizer.json");
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("tokenizer.json"), dir.file("out.json"), o); })
                .find("never overwrites"),
            std::string::npos);
  o.map_path.clear();
  o.report_path = dir.file("tokenizer.json");
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("tokenizer.json"), dir.file("out.json"), o); })
                .find("--report"),
            std::string::npos);
  o.report_path = dir.file("notes.md");  // inside the input folder
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.path(), dir.file("out"), o); }).find("never overwrites"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("out.json")));
  EXPECT_FALSE(fs::exists(dir.file("out")));
  EXPECT_EQ(read_text_file(dir.file("tokenizer.json")), original);
}

TEST(PruneCommand, BadInputIsAClearError) {
  test::TempDir dir;
  write(dir.file("good.txt"), "hello world\n");
  write(dir.file("latin1.txt"), "ok line\ncaf\xE9 au lait\n");
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("latin1.txt")};
  EXPECT_NE(error_of([&] { prune::prune_vocab(test::gpt2_small_tokenizer(), dir.file("a.json"), o); })
                .find("latin1.txt: not UTF-8: invalid byte 0xe9 at line 2"),
            std::string::npos);
  o.corpus = {dir.file("good.txt")};
  o.keep = 100;
  EXPECT_NE(error_of([&] { prune::prune_vocab(test::gpt2_small_tokenizer(), dir.file("a.json"), o); })
                .find("--keep 100 is smaller than the mandatory set: 257"),
            std::string::npos);
  o.keep = 400;
  json wp = json::parse(read_text_file(test::gpt2_small_tokenizer()));
  wp["model"]["type"] = "WordPiece";
  write(dir.file("wordpiece.json"), wp.dump());
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("wordpiece.json"), dir.file("a.json"), o); })
                .find("unsupported model type \"WordPiece\""),
            std::string::npos);
  write(dir.file("broken.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": ");
  EXPECT_NE(error_of([&] { prune::prune_vocab(dir.file("broken.json"), dir.file("a.json"), o); }).find("broken.json"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("a.json")));
}

}  // namespace
}  // namespace pocket
