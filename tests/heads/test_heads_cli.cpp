// The decision-head commands end to end on stories260K and a tiny synthetic
// Pocket file: train-head, classify (text, labelled file, zero-shot), route,
// rank, attach-head, and their errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_run.h"
#include "common/test_util.h"

namespace pocket::test {
namespace {

void write_topic_data(const std::string& path, int first, int last) {
  const char* animals[] = {"The cat", "A dog", "The bird", "A fish", "The frog", "A bunny", "The duck", "A puppy"};
  const char* food[] = {"The cake", "An apple", "The soup", "A cookie", "The bread", "A pie", "The candy", "An egg"};
  const char* tails[] = {" was big.", " was little.", " was red.", " was happy.", " was on the table.",
                         " was in the box.", " was nice.", " was there.", " was good.", " was old."};
  std::ofstream f(path);
  for (int t = first; t < last; ++t)
    for (int i = 0; i < 8; ++i) {
      f << nlohmann::json({{"text", std::string(animals[i]) + tails[t]}, {"label", "animal"}}).dump() << "\n";
      f << nlohmann::json({{"text", std::string(food[i]) + tails[t]}, {"label", "food"}}).dump() << "\n";
    }
}

TEST(HeadsCli, TrainClassifyRouteRankOnStories) {
  POCKET_SKIP_WHEN_EMULATED("runs the CLI several times on a real model; ISA-independent");
  TempDir dir;
  write_topic_data(dir.file("train.jsonl"), 0, 8);
  write_topic_data(dir.file("val.jsonl"), 8, 10);
  const std::string m = "-m " + stories_model() + " -t 2";
  Result r = run("train-head " + m + " --data " + dir.file("train.jsonl") + " --val " + dir.file("val.jsonl") +
                 " -o " + dir.file("t.head") + " --cache-dir " + dir.file("cache") + " --lr 0.01 --json -q");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json rep = nlohmann::json::parse(r.out);
  EXPECT_EQ(rep["classes"], 2);
  EXPECT_GT(rep["splits"][1]["accuracy"].get<double>(), 0.8) << r.out;
  // A second run reads the cached features and trains the same head.
  Result again = run("train-head " + m + " --data " + dir.file("train.jsonl") + " --val " + dir.file("val.jsonl") +
                     " -o " + dir.file("t2.head") + " --cache-dir " + dir.file("cache") + " --lr 0.01 --json -q");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(again.out)["splits"], rep["splits"]);

  r = run("classify " + m + " --head " + dir.file("t.head") + " --json \"The frog was in the box.\"");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json p = nlohmann::json::parse(r.out);
  EXPECT_EQ(p["label"], "animal") << r.out;
  EXPECT_EQ(p["top"].size(), 2u);

  r = run("classify " + m + " --head " + dir.file("t.head") + " -f " + dir.file("val.jsonl"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("32 examples: accuracy"), std::string::npos) << r.out;

  r = run("route " + m + " --head " + dir.file("t.head") + " --threshold 0.5 \"The cake was old.\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("food\t", 0), 0u) << r.out;  // confident: in scope (the threshold itself: HeadsModel.RouteBelowThreshold)

  r = run("classify " + m + " --zero-shot time,banana \"Once upon a\" --template \"{text}\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("time\t", 0), 0u) << r.out;

  std::ofstream(dir.file("cands.txt")) << "purple quantum elephants\ntime, there was a little girl\n";
  r = run("rank " + m + " --query \"Once upon a\" --candidates " + dir.file("cands.txt"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1\t"), std::string::npos);
  EXPECT_LT(r.out.find("little girl"), r.out.find("elephants")) << r.out;

  // Errors: one clear line, non-zero exit.
  r = run("classify " + m + " --head " + dir.file("missing.head") + " x");
  EXPECT_EQ(r.code, 1) << r.out;
  r = run("classify " + m + " --head " + dir.file("t.head") + " --zero-shot a,b x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("not both"), std::string::npos) << r.out;
  r = run("train-head " + m + " --data " + dir.file("nope.jsonl") + " -o " + dir.file("x.head"));
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST(HeadsCli, AttachedHeadsTravelWithThePocketFileAndRefuseOtherModels) {
  POCKET_SKIP_WHEN_EMULATED("runs the CLI several times; ISA-independent");
  TempDir dir;
  ASSERT_EQ(run("create --preset tiny-llama -o " + dir.file("a.pq4")).code, 0);
  ASSERT_EQ(run("create --preset tiny-llama --seed 2 -o " + dir.file("b.pq4")).code, 0);
  write_topic_data(dir.file("train.jsonl"), 0, 10);
  Result r = run("train-head -m " + dir.file("a.pq4") + " --data " + dir.file("train.jsonl") + " --no-cache -q --name topic -o " +
                 dir.file("t.head"));
  ASSERT_EQ(r.code, 0) << r.out;
  // Another model (same shape, other weights): a clear error naming both hashes.
  r = run("classify -m " + dir.file("b.pq4") + " --head " + dir.file("t.head") + " hello");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("content hash"), std::string::npos) << r.out;
  EXPECT_EQ(run("attach-head -m " + dir.file("b.pq4") + " --head " + dir.file("t.head") + " -o " + dir.file("x.pq4")).code, 1);
  // Attached: the model file answers by itself, with the same probabilities as the head file.
  r = run("attach-head -m " + dir.file("a.pq4") + " --head " + dir.file("t.head") + " -o " + dir.file("a+head.pq4"));
  ASSERT_EQ(r.code, 0) << r.out;
  Result own = run("classify -m " + dir.file("a+head.pq4") + " --json \"The cat was big.\"");
  Result file = run("classify -m " + dir.file("a.pq4") + " --head " + dir.file("t.head") + " --json \"The cat was big.\"");
  ASSERT_EQ(own.code, 0) << own.out;
  ASSERT_EQ(file.code, 0) << file.out;
  EXPECT_EQ(own.out, file.out);
  Result named = run("classify -m " + dir.file("a+head.pq4") + " --head " + dir.file("a+head.pq4") + "#topic --json \"The cat was big.\"");
  EXPECT_EQ(named.out, file.out);
}

}  // namespace
}  // namespace pocket::test
