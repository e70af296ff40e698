// Bad evaluation inputs give clear errors, in the library and in `pocket eval`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "convert/create_model.h"
#include "eval/perplexity.h"
#include "runtime/loader.h"
#include "util/error.h"

namespace pocket::eval {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EvalErrors, EmptyAndTooShortTexts) {
  LoadedModel m = load_model(test::stories_model());
  EXPECT_NE(error_of([&] { tokenize_for_eval(*m.tokenizer, "", "empty.txt"); }).find("empty.txt: the evaluation text is empty"),
            std::string::npos);
  const std::string e = error_of([&] { tokenize_for_eval(*m.tokenizer, "a", "short.txt"); });
  EXPECT_NE(e.find("short.txt"), std::string::npos) << e;
  EXPECT_NE(e.find("at least 2"), std::string::npos) << e;
}

TEST(EvalErrors, MismatchedVocabulary) {
  test::TempDir dir;
  convert::CreateOptions o;
  o.preset = "tiny-qwen3";
  o.weights = DType::F32;
  convert::create_model(o, dir.file("tiny.gguf"));
  LoadedModel a = load_model(test::stories_model());
  LoadedModel b = load_model(dir.file("tiny.gguf"));
  const std::string e = error_of([&] { check_same_vocab(*a.model, *a.tokenizer, *b.model, *b.tokenizer); });
  EXPECT_NE(e.find("do not share a vocabulary"), std::string::npos) << e;
  EXPECT_NE(e.find("vocab_size 512"), std::string::npos) << e;
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_THROW(evaluate(*a.model, b.model.get(), tokens, EvalOptions{.ctx = 4}), Error);
}

TEST(EvalErrors, ContextLongerThanTheModel) {
  LoadedModel m = load_model(test::stories_model());
  EvalOptions o;
  o.ctx = m.model->config().max_seq_len + 1;
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const std::string e = error_of([&] { evaluate(*m.model, nullptr, tokens, o); });
  EXPECT_NE(e.find("exceeds"), std::string::npos) << e;
}

struct Cli {
  int code;
  std::string out;  // stdout and stderr together
};

Cli pocket_cli(const std::string& args) {
  const std::string cmd = pocket::test::cli_command() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Cli r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(EvalCli, MissingFilesAreNamed) {
  test::TempDir dir;
  const std::string text = dir.file("missing.txt");
  Cli r = pocket_cli("eval -m " + test::stories_model() + " -f " + text);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing.txt"), std::string::npos) << r.out;
  std::ofstream(dir.file("t.txt")) << "Once upon a time there was a cat.";
  r = pocket_cli("eval -m " + dir.file("nope.bin") + " -f " + dir.file("t.txt"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("nope.bin"), std::string::npos) << r.out;
  std::ofstream(dir.file("empty.txt")).flush();
  r = pocket_cli("eval -m " + test::stories_model() + " -f " + dir.file("empty.txt"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("empty"), std::string::npos) << r.out;
}

TEST(EvalCli, JsonReportAgainstItself) {
  test::TempDir dir;
  std::ofstream(dir.file("t.txt")) << "Once upon a time there was a cat. The cat liked to play with a ball.";
  Cli r = pocket_cli("eval -m " + test::stories_model() + " --ref " + test::stories_model() + " -f " +
                     dir.file("t.txt") + " --ctx 8 -t 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kl_mean"].get<double>(), 0.0);
  EXPECT_EQ(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["perplexity"].get<double>(), j["reference_perplexity"].get<double>());
  EXPECT_EQ(j["stride"].get<int>(), 4);
  EXPECT_NEAR(j["model"]["bits_per_weight"].get<double>(), 32.0, 1e-9);  // llama2.c: all f32
}

}  // namespace
}  // namespace pocket::eval
