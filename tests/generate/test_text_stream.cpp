#include <gtest/gtest.h>

#include "common/qwen3_tokenizer.h"
#include "generate/text_stream.h"
#include "tokenizer/hf_json.h"

namespace pocket {
namespace {


bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(TextStream, EmitsOnlyCompleteUtf8AndEverything) {
  const std::string text = "小模型在手机里运行 🙂👩‍👩‍👧 ok 龘";
  auto ids = test::qwen3_tokenizer()->encode(text);
  TextStream s(*test::qwen3_tokenizer(), {});
  std::string all;
  for (int32_t id : ids) {
    std::string piece = s.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << piece;
    all += piece;
  }
  all += s.finish();
  EXPECT_EQ(all, text);
}

TEST(TextStream, CutsAtStopStringsSplitAcrossTokens) {
  const std::string text = "The answer is 42.\nUser: next question";
  auto ids = test::qwen3_tokenizer()->encode(text);
  TextStream s(*test::qwen3_tokenizer(), {"\nUser:", "never"});
  std::string all;
  size_t used = 0;
  for (int32_t id : ids) {
    all += s.push(id);
    ++used;
    if (s.stopped()) break;
  }
  all += s.finish();
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(all, "The answer is 42.");
  EXPECT_LT(used, ids.size());
}

TEST(TextStream, HeldBackPrefixIsReleasedWhenItIsNotAStop) {
  auto ids = test::qwen3_tokenizer()->encode("a <b> c");
  TextStream s(*test::qwen3_tokenizer(), {"<b>x"});
  std::string all;
  for (int32_t id : ids) all += s.push(id);
  all += s.finish();
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(all, "a <b> c");
}

}  // namespace
}  // namespace pocket
