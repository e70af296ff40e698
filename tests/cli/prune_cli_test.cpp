// `pocket prune-vocab` as a user runs it: a tokenizer pruned end to end, and
// hostile input giving one `pocket: error:` line and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_run.h"
#include "common/test_util.h"

namespace {

using pocket::test::gpt2_small_tokenizer;
using pocket::test::run;


int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliPrune, PrunesATokenizerAndWritesTheReport) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << "hello world\nthe quick brown fox\n";
  std::ofstream(dir.file("heldout.txt")) << "the brown world\n";
  auto r = run("prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("out.json") + " --keep 300 --corpus " +
               dir.file("corpus.txt") + " --heldout " + dir.file("heldout.txt") + " --report " +
               dir.file("report.json") + " -t 2");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("vocabulary: 957 -> 300 tokens"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("out.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out.vocab_map.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("report.json")));
  auto ids = run("tokenize -m " + dir.file("out.json") + " --ids \"the brown world\"");
  EXPECT_EQ(ids.code, 0) << ids.out;
}

TEST(CliPrune, BadInputGivesOneClearError) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("good.txt")) << "hello world\n";
  std::ofstream(dir.file("latin1.txt")) << "caf\xE9\n";
  std::ofstream(dir.file("bad.json")) << "{\"model\": [";
  std::ofstream(dir.file("wordpiece.json")) << "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}";
  const std::string good = " --corpus " + dir.file("good.txt");
  struct Case {
    std::string args, must_mention;
    int code;
  } cases[] = {
      {"prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("o.json") + " --keep 300 --corpus " + dir.file("latin1.txt"),
       "not UTF-8", 1},
      {"prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("o.json") + " --keep 10" + good, "smaller than the mandatory set",
       1},
      {"prune-vocab " + dir.file("bad.json") + " " + dir.file("o.json") + " --keep 300" + good, "bad.json", 1},
      {"prune-vocab " + dir.file("wordpiece.json") + " " + dir.file("o.json") + " --keep 300" + good, "WordPiece", 1},
      {"prune-vocab " + gpt2_small_tokenizer() + " " + gpt2_small_tokenizer() + " --keep 300" + good, "never overwrites", 1},
      {"prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("o.json") + " --keep 300 --corpus /nonexistent/c.txt",
       "/nonexistent/c.txt", 1},
      {"prune-vocab " + pocket::test::stories_model() + " " + dir.file("o.bin") + " --keep 300 --tokenizer x" + good,
       "--tokenizer", 2},
      {"prune-vocab " + pocket::test::stories_model() + " " + dir.file("o.bin") + " --keep 300" + good, "llama2c", 1},
      {"prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("o.json") + good, "--keep", 2},
      {"prune-vocab " + gpt2_small_tokenizer() + " " + dir.file("o.json") + " --keep 300", "--corpus", 2},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.must_mention), std::string::npos) << c.args << "\n" << r.out;
    if (c.code == 1) {
      EXPECT_EQ(r.out.rfind("pocket: error: ", 0), 0u) << r.out;
      EXPECT_EQ(count_lines(r.out), 1) << r.out;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.bin")));
}

// pocket create --tokenizer: a model that carries a real vocabulary, which
// prune-vocab then prunes (model and tokenizer together).
TEST(CliPrune, CreateWithARealTokenizerThenPruneTheModel) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << "hello world\nthe quick brown fox\n";
  auto c = run("create --preset tiny-qwen3 --tokenizer " + gpt2_small_tokenizer() + " -o " + dir.file("m.pocket"));
  ASSERT_EQ(c.code, 0) << c.out;
  auto info = run("info " + dir.file("m.pocket"));
  EXPECT_NE(info.out.find("957"), std::string::npos) << info.out;
  auto p = run("prune-vocab " + dir.file("m.pocket") + " " + dir.file("p.pocket") + " --keep 300 --corpus " +
               dir.file("corpus.txt"));
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("(Pocket file)"), std::string::npos) << p.out;
  auto r = run("run -m " + dir.file("p.pocket") + " -p \"hello world\" -n 4 --temp 0 -q");
  EXPECT_EQ(r.code, 0) << r.out;
  auto info2 = run("info " + dir.file("p.pocket"));
  EXPECT_NE(info2.out.find("300"), std::string::npos) << info2.out;
}

// A SentencePiece model (stories260K + tok512 as a Pocket file) pruned, then
// `pocket eval --ref-map` against the original: KL over the kept tokens is 0.
TEST(CliPrune, SentencePieceModelThenEvalWithTheMap) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << "Once upon a time, there was a little girl named Lily.\n";
  std::ofstream(dir.file("text.txt")) << "Once upon a time, there was a little dog. Lily was happy.\n";
  auto q = run("quantize " + pocket::test::stories_model() + " " + dir.file("s.pocket") + " --weights q8 --group 32");
  ASSERT_EQ(q.code, 0) << q.out;
  auto p = run("prune-vocab " + dir.file("s.pocket") + " " + dir.file("p.pocket") + " --keep 400 --corpus " +
               dir.file("corpus.txt"));
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("vocabulary: 512 -> 400 tokens"), std::string::npos) << p.out;
  auto e = run("eval -m " + dir.file("p.pocket") + " --ref " + dir.file("s.pocket") + " --ref-map " +
               dir.file("p.vocab_map.json") + " -f " + dir.file("text.txt") + " --ctx 16 -t 2");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("KL(ref || model): mean 0.000000, p99 0.000000, max 0.000000"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("reference probability on dropped tokens"), std::string::npos) << e.out;
  // A map that is not this pair's, and --ref-map without --ref, are clear errors.
  auto bad = run("eval -m " + dir.file("s.pocket") + " --ref " + dir.file("s.pocket") + " --ref-map " +
                 dir.file("p.vocab_map.json") + " -f " + dir.file("text.txt") + " --ctx 16");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("pocket: error:"), std::string::npos) << bad.out;
  auto no_ref = run("eval -m " + dir.file("p.pocket") + " --ref-map " + dir.file("p.vocab_map.json") + " -f " +
                    dir.file("text.txt"));
  EXPECT_EQ(no_ref.code, 2) << no_ref.out;
}

}  // namespace
