// pocket chat --save / --load: a conversation saved after a turn and resumed
// in a new process continues exactly as one that never stopped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "cli/cli_run.h"
#include "common/test_util.h"

namespace {

using pocket::test::run;

TEST(CliSessionState, ChatResumesWhereItStopped) {
  pocket::test::TempDir dir;
  const std::string state = dir.file("chat.state");
  const std::string chat = "chat -m " + pocket::test::stories_model() + " -n 12 --temp 0 -q";
  auto both = run(chat, "Once upon a time\nThe dog\n");
  ASSERT_EQ(both.code, 0) << both.out;
  const size_t nl = both.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << both.out;

  auto first = run(chat + " --save " + state, "Once upon a time\n");
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_EQ(first.out, both.out.substr(0, nl + 1));
  // Written through a temporary name and renamed: nothing else is left.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.file(""))) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"chat.state"});
  auto second = run(chat + " --load " + state, "The dog\n");
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_EQ(second.out, both.out.substr(nl + 1));

  // A damaged file: one error line naming it, non-zero exit, no crash.
  std::ofstream(dir.file("bad.state"), std::ios::binary) << "POCKETSS\x01";
  auto bad = run(chat + " --load " + dir.file("bad.state"), "The dog\n");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("bad.state: truncated"), std::string::npos) << bad.out;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
}

}  // namespace
