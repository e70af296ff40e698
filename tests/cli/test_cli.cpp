// The pocket command line as a user runs it: exit codes, one clear error
// line, output on stdout.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "cli/cli_run.h"
#include "common/test_util.h"

namespace {

using pocket::test::run;

std::string stories() { return pocket::test::stories_model(); }

TEST(Cli, RunPrintsTheGreedyStory) {
  auto r = run("run -m " + stories() + " -n 12 --temp 0 -q");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named Lily. She\n");
  for (const std::string& draft : {std::string("lookup"), std::string("oracle"), "model --draft-model " + stories(),
                                   std::string("lookup --draft-tree 8"), "model --draft-model " + stories() + " --draft-tree 8"}) {  // speculative: the same text
    auto s = run("run -m " + stories() + " -n 12 --temp 0 -q --draft " + draft + " --draft-max 4");
    EXPECT_EQ(s.code, 0) << s.out;
    EXPECT_EQ(s.out, r.out) << draft;
  }
  // Under a constraint, speculative decoding prints what plain decoding does.
  const std::string regex = " -n 24 --temp 0 -q --regex \"( [a-z]+){3,8}\\.\"";
  auto c = run("run -m " + stories() + regex);
  EXPECT_EQ(c.code, 0) << c.out;
  for (const std::string& draft : {std::string("lookup"), std::string("oracle"), "model --draft-model " + stories()}) {
    auto s = run("run -m " + stories() + regex + " --draft " + draft + " --draft-max 4");
    EXPECT_EQ(s.code, 0) << s.out;
    EXPECT_EQ(s.out, c.out) << draft;
  }
}

TEST(Cli, ChatWorksFromAPipe) {
  auto r = run("chat -m " + stories() + " -n 8 --temp 0 -q", "Once upon a time\nThe dog\n");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST(Cli, InfoAndTokenize) {
  auto info = run("info " + stories());
  EXPECT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("llama2c"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("260032"), std::string::npos) << info.out;
  auto ids = run("tokenize -m " + stories() + " --ids --bos \"Once upon a time\"");
  EXPECT_EQ(ids.code, 0) << ids.out;
  EXPECT_EQ(ids.out, "1 403 407 261 378\n");
  auto qwen = run("tokenize -m " + pocket::test::qwen3_tokenizer_dir() + " --ids", "你好，世界! <|im_start|>");
  EXPECT_EQ(qwen.code, 0) << qwen.out;
  EXPECT_EQ(qwen.out.find("151644"), std::string::npos) << "special token matched without --special: " << qwen.out;
}

// Each bad input: a non-zero exit, one error line that names the problem,
// no crash (a signal would give a code >= 128).
TEST(Cli, BadInputGivesOneClearError) {
  struct Case {
    std::string args, stdin_text, must_mention;
    int code;
  } cases[] = {
      {"run -m /nonexistent/model.bin", "", "/nonexistent/model.bin", 1},
      {"run -m " + stories() + " --temp -1", "", "--temp", 2},
      {"run -m " + stories() + " --top-p 7", "", "--top-p", 2},
      {"run -m " + stories() + " -t 0", "", "--threads", 2},
      {"run -m " + stories() + " --bogus", "", "--bogus", 2},
      {"run -m " + stories() + " --seed -1", "", "--seed: Value -1 is negative", 2},
      {"create --preset tiny-llama --seed -5 -o /tmp/never-written.gguf", "", "--seed: Value -5 is negative", 2},
      {"run -m " + stories() + " -c 100000", "", "context", 1},
      {"run -m " + stories() + " -c 8 -p \"one two three four five six seven eight nine ten\"", "", "context", 1},
      {"run -m " + stories() + " --draft dflash", "", "--dflash DIR", 1},
      {"run -m " + stories() + " --dflash /nonexistent/draft", "", "/nonexistent/draft: no such DFlash draft folder or file", 1},
      {"run -m " + stories() + " --draft lookup --dflash /nonexistent/draft", "", "--dflash", 1},
      {"run -m " + stories() + " --draft bogus", "", "--draft", 2},
      {"run -m " + stories() + " --draft model", "", "--draft-model FILE", 1},
      {"run -m " + stories() + " --draft-model /nonexistent/draft.gguf", "", "/nonexistent/draft.gguf", 1},
      {"info " + pocket::test::stories_tokenizer(), "", "tok512.bin", 1},
      {"convert-draft /nonexistent/draft /tmp/never-written.pocket", "", "/nonexistent/draft/config.json", 1},
      {"convert-draft /nonexistent/draft /tmp/never-written.pocket --weights q3", "", "--weights", 1},
      {"run -m " + stories() + " --ngram-cache /nonexistent/c.ngram", "", "/nonexistent/c.ngram: cannot open", 1},
      {"run -m " + stories() + " --draft oracle --ngram-cache /nonexistent/c.ngram", "", "--draft lookup", 1},
      {"ngram-build -m " + stories() + " --corpus /nonexistent/corpus.txt -o /tmp/never.ngram", "", "/nonexistent/corpus.txt", 1},
      {"run -m " + stories() + " --draft lookup --draft-vocab 100", "", "--draft-vocab is for DFlash drafts", 1},
      {"run -m " + stories() + " --draft-model " + stories() + " --draft-vocab 100", "", "needs a token ranking", 1},
      {"run -m " + stories() + " --draft-model " + stories() + " --draft-ranking /nonexistent/r.txt", "", "/nonexistent/r.txt", 1},
      {"run -m " + stories() + " --dflash /nonexistent/draft --draft-ranking /nonexistent/r.txt", "", "--draft-ranking is for draft models", 1},
      {"run -m " + stories() + " --draft-vocab 100", "", "--dflash DIR", 1},
      {"run -m " + stories() + " --dflash /nonexistent/draft --draft-vocab -3", "", "--draft-vocab", 2},
      {"draft-vocab -m " + stories() + " --corpus /nonexistent/corpus.txt -o /tmp/never.txt", "", "/nonexistent/corpus.txt", 1},
      {"run -m " + stories() + " --draft lookup --draft-tree 1", "", "draft tree of 1 nodes", 1},
      {"run -m " + stories() + " --draft lookup --draft-tree 99", "", "--draft-tree", 2},
      {"run -m " + stories() + " --dflash /nonexistent/draft --draft-tree 8", "", "no such DFlash draft", 1},  // trees take DFlash drafts
      {"bench -m " + stories() + " --verify 2 --json", "", "--json excludes --verify", 2},
      {"bench -m " + stories() + " --verify 2 --kv q8", "", "--kv excludes --verify", 2},
      {"bench -m " + stories() + " --verify 2 --any-json", "", "--verify: measures unconstrained forwards", 2},
      {"bench -m " + stories() + " --verify 2 -p 100000", "", "exceeds the model's context of 512", 1},
      {"bench -m " + stories() + " --verify 40", "", "--verify", 2},
      {"frobnicate", "", "frobnicate", 2},
      {"info", "", "model", 2},
  };
  for (const auto& c : cases) {
    auto r = run(c.args, c.stdin_text);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.must_mention), std::string::npos) << c.args << "\n" << r.out;
  }
}

// pocket bench --verify: one row per block size with a positive verify time
// and cost, over the context -p gives (its own default otherwise).
TEST(Cli, BenchVerifyMeasuresEachBlockSize) {
  auto r = run("bench -m " + stories() + " --verify 2,4 -t 1 -n 8 -p 40 --runs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| context 40"), std::string::npos) << r.out;
  for (const std::string k : {"2", "4"}) {
    const size_t at = r.out.find("\n| " + k + " | ");
    ASSERT_NE(at, std::string::npos) << "no row for k = " << k << "\n" << r.out;
    // | k | verify ms | x decode step | ...
    const std::string row = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    double ms = 0, cost = 0;
    ASSERT_EQ(std::sscanf(row.c_str(), "| %*d | %lf | %lf |", &ms, &cost), 2) << row;
    EXPECT_GT(ms, 0.0) << row;
    EXPECT_GT(cost, 0.0) << row;
  }
  auto d = run("bench -m " + stories() + " --verify 2 -t 1 -n 8");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("| context 256"), std::string::npos) << d.out;
}

// pocket draft-vocab: a ranking file of the model's vocabulary, its end-of-
// sequence token first (speculative/draft_vocab.h reads it back).
TEST(Cli, DraftVocabWritesARankingFile) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << "Once upon a time there was a dog.\nThe dog was happy.\n";
  auto r = run("draft-vocab -m " + stories() + " --corpus " + dir.file("corpus.txt") + " -o " + dir.file("r.txt"));
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream f(dir.file("r.txt"));
  std::string head;
  std::getline(f, head);
  EXPECT_EQ(head, "pocket-draft-vocab 1 512");
  int lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  EXPECT_GT(lines, 5);
  EXPECT_LT(lines, 100);  // only the tokens the corpus uses
}

// A draft model with a ranking (--draft-ranking, --draft-vocab): the output
// is the plain run's; a ranking holding fewer ids than asked is refused.
TEST(Cli, DraftModelWithADraftVocabularyKeepsTheOutput) {
  pocket::test::TempDir dir;
  std::ofstream(dir.file("corpus.txt")) << "Once upon a time there was a dog. The dog was happy and ran to the park.\n";
  ASSERT_EQ(run("draft-vocab -m " + stories() + " --corpus " + dir.file("corpus.txt") + " -o " + dir.file("r.txt")).code, 0);
  const std::string base = "run -m " + stories() + " --temp 0 -n 24 -q";
  auto plain = run(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  auto spec = run(base + " --draft-model " + stories() + " --draft-ranking " + dir.file("r.txt") + " --draft-vocab 20");
  EXPECT_EQ(spec.code, 0) << spec.out;
  EXPECT_EQ(spec.out, plain.out);
  auto big = run(base + " --draft-model " + stories() + " --draft-ranking " + dir.file("r.txt") + " --draft-vocab 400");
  EXPECT_EQ(big.code, 1) << big.out;
  EXPECT_NE(big.out.find("the ranking holds"), std::string::npos) << big.out;
}

// An error that is known before any output comes alone: an over-long
// prompt is not echoed first.
TEST(Cli, AnOverLongPromptFailsBeforeAnyOutput) {
  pocket::test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Once upon a time there was a dog. ";
  std::ofstream(dir.file("long.txt")) << text;
  auto r = run("run -m " + stories() + " -c 64 -f " + dir.file("long.txt"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("Once upon a time"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("pocket: error: the prompt has ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("context holds 64"), std::string::npos) << r.out;
}

}  // namespace
