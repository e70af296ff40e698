// Head files: round trip, and clear errors for a wrong base, truncation,
// hostile sizes; data loading (JSONL, CSV with quotes, TSV) and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "formats/format_test_util.h"
#include "formats/gguf_writer.h"
#include "heads/dataset.h"
#include "heads/head_file.h"
#include "util/error.h"

namespace pocket::heads {
namespace {

Head small_head(int hidden) {
  Head h;
  h.name = "intent";
  h.base_hash = "0123456789abcdef";
  h.features.pooling = Pooling::Last;
  h.features.layer = 2;
  h.features.prompt_template = "Q: {text}";
  h.labels = {"a", "b", "c"};
  h.net.init(6, hidden, 3, 5);
  test::Rng rng(1);
  for (float& v : h.net.w2) v = rng.uniform();
  h.mean.assign(6, 0.5f);
  h.inv_std.assign(6, 2.0f);
  h.temperature = 1.7f;
  h.threshold = 0.4f;
  return h;
}

using test::error_of;  // fails the test when nothing is thrown

TEST(HeadFile, RoundTripKeepsEverything) {
  test::TempDir dir;
  for (int hidden : {0, 4}) {
    Head h = small_head(hidden);
    save_head(h, dir.file("h.head"));
    Head r = load_head(dir.file("h.head"));
    EXPECT_EQ(r.name, h.name);
    EXPECT_EQ(r.base_hash, h.base_hash);
    EXPECT_EQ(r.features.pooling, Pooling::Last);
    EXPECT_EQ(r.features.layer, 2);
    EXPECT_EQ(r.features.prompt_template, "Q: {text}");
    EXPECT_EQ(r.labels, h.labels);
    EXPECT_EQ(r.net.w1, h.net.w1);
    EXPECT_EQ(r.net.w2, h.net.w2);
    EXPECT_EQ(r.temperature, 1.7f);
    EXPECT_EQ(r.threshold, 0.4f);
    const std::vector<float> f = {1, 2, 3, 4, 5, 6};
    EXPECT_EQ(r.probabilities(f.data()), h.probabilities(f.data()));
  }
}

TEST(HeadFile, WrongBaseIsAClearError) {
  Head h = small_head(0);
  EXPECT_NO_THROW(check_base(h, "0123456789abcdef", "x.head"));
  const std::string e = error_of([&] { check_base(h, "fedcba9876543210", "x.head"); });
  EXPECT_NE(e.find("0123456789abcdef"), std::string::npos) << e;
  EXPECT_NE(e.find("fedcba9876543210"), std::string::npos) << e;
}

TEST(HeadFile, TruncatedFilesFailCleanly) {
  test::TempDir dir;
  save_head(small_head(4), dir.file("h.head"));
  std::ifstream in(dir.file("h.head"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{20}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(dir.file("t.head"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    const std::string e = error_of([&] { load_head(dir.file("t.head")); });
    EXPECT_FALSE(e.empty()) << "a file cut at " << cut << " of " << bytes.size() << " bytes loaded";
  }
}

TEST(HeadFile, HostileSizesAreRejectedBeforeAllocating) {
  test::TempDir dir;
  Head h = small_head(0);
  auto write_with = [&](const std::string& key, GgufMeta v) {
    GgufWriter w(32);
    add_head(w, h);
    w.set("head.intent." + key, std::move(v));
    w.write(dir.file("bad.head"));
    return error_of([&] { load_head(dir.file("bad.head")); });
  };
  EXPECT_NE(write_with("feature_dim", GgufMeta::i32(1 << 30)).find("out of range"), std::string::npos);
  EXPECT_NE(write_with("hidden", GgufMeta::i32(1 << 20)).find("not a valid head"), std::string::npos);
  EXPECT_NE(write_with("feature_dim", GgufMeta::i32(7)).find("bytes"), std::string::npos);  // tensors no longer fit
  EXPECT_NE(write_with("labels", GgufMeta::strings({"only"})).find("not a valid head"), std::string::npos);
  EXPECT_NE(write_with("temperature", GgufMeta::f32(-1)).find("temperature"), std::string::npos);
  EXPECT_NE(write_with("pooling", GgufMeta::string("max")).find("pooling"), std::string::npos);
  EXPECT_NE(write_with("features", GgufMeta::string("pixels")).find("feature kind"), std::string::npos);
  EXPECT_NE(write_with("labels", GgufMeta::strings({"a", "a", "c"})).find("twice"), std::string::npos);
  // Not a head at all.
  GgufWriter w(32);
  w.set_u32("x", 1);
  w.write(dir.file("empty.gguf"));
  EXPECT_NE(error_of([&] { load_head(dir.file("empty.gguf")); }).find("no decision head"), std::string::npos);
}

// Found by fuzz_head_file: finite weights that overflow float, or a
// denormal temperature, made every probability NaN. The answer must stay a
// distribution (finite, in [0, 1], summing to 1 within 1e-6), with the mass
// on the largest logits.
TEST(HeadFile, OverflowingLogitsStillGiveADistribution) {
  Head h = small_head(0);
  std::vector<float> x(6, 1.0f);
  for (float& w : h.net.w2) w = 3e38f;
  for (int k = 0; k < 6; ++k) h.net.w2[k] = -3e38f;  // class 0 sums to -inf, classes 1 and 2 to +inf
  for (float t : {1.0f, 1e-45f}) {
    h.temperature = t;
    const std::vector<float> p = h.probabilities(x.data());
    ASSERT_EQ(p.size(), 3u);
    double sum = 0;
    for (float v : p) {
      EXPECT_TRUE(v >= 0.0f && v <= 1.0f) << v;
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_LT(p[0], p[1]);
  }
  float nan_logits[3] = {std::nanf(""), 2.0f, 1.0f};
  softmax(nan_logits, 3);
  EXPECT_EQ(nan_logits[0], 0.0f);
  EXPECT_NEAR(nan_logits[1] + nan_logits[2], 1.0f, 1e-6f);
}

TEST(HeadFile, SeveralHeadsInOneFileAreChosenByName) {
  test::TempDir dir;
  Head a = small_head(0), b = small_head(4);
  b.name = "sentiment";
  GgufWriter w(32);
  add_head(w, a);
  add_head(w, b);
  w.write(dir.file("two.gguf"));
  EXPECT_NE(error_of([&] { load_head(dir.file("two.gguf")); }).find("choose one"), std::string::npos);
  EXPECT_EQ(load_head(dir.file("two.gguf") + "#sentiment").net.hidden, 4);
  EXPECT_EQ(load_head(dir.file("two.gguf") + "#intent").net.hidden, 0);
  EXPECT_NE(error_of([&] { load_head(dir.file("two.gguf") + "#nope"); }).find("no head named"), std::string::npos);
}

TEST(HeadsData, ReadsJsonlCsvAndTsv) {
  test::TempDir dir;
  std::ofstream(dir.file("a.jsonl")) << "{\"text\":\"hello\",\"label\":3}\n\n{\"text\":\"bye\",\"label\":\"x\"}\n";
  auto j = load_examples(dir.file("a.jsonl"), {});
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].label, "3");
  EXPECT_EQ(j[1].text, "bye");
  std::ofstream(dir.file("b.csv")) << "cat,label,review\n\"a, b\",1,\"said \"\"hi\"\"\nthere\"\nc,0,plain\r\n";
  DataOptions o;
  o.text = "review";
  auto c = load_examples(dir.file("b.csv"), o);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].text, "said \"hi\"\nthere");
  EXPECT_EQ(c[1].text, "plain");
  o.label = "cat";
  o.text = "review,label";
  EXPECT_EQ(load_examples(dir.file("b.csv"), o)[0].label, "a, b");
  EXPECT_EQ(load_examples(dir.file("b.csv"), o)[1].text, "plain. 0");
  std::ofstream(dir.file("c.tsv")) << "train\tx\tone\ntest\ty\ttwo\n";
  DataOptions t;
  t.header = false;
  t.text = "2";
  t.label = "1";
  t.where = "0=test";
  auto s = load_examples(dir.file("c.tsv"), t);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].text, "two");
  EXPECT_EQ(s[0].label, "y");
}

TEST(HeadsData, BadRowsNameTheFileAndLine) {
  test::TempDir dir;
  std::ofstream(dir.file("a.jsonl")) << "{\"text\":\"ok\",\"label\":\"a\"}\n{\"text\":\"no label\"}\n";
  EXPECT_NE(error_of([&] { load_examples(dir.file("a.jsonl"), {}); }).find("a.jsonl:2"), std::string::npos);
  std::ofstream(dir.file("b.jsonl")) << "[1,2]\n";
  EXPECT_NE(error_of([&] { load_examples(dir.file("b.jsonl"), {}); }).find("not a JSON object"), std::string::npos);
  std::ofstream(dir.file("c.csv")) << "text,label\n\"open,a\n";
  EXPECT_NE(error_of([&] { load_examples(dir.file("c.csv"), {}); }).find("not closed"), std::string::npos);
  std::ofstream(dir.file("d.csv")) << "text,label\nab\xff\xfe,a\n";
  EXPECT_NE(error_of([&] { load_examples(dir.file("d.csv"), {}); }).find("UTF-8"), std::string::npos);
  std::ofstream(dir.file("e.csv")) << "words,label\nx,a\n";
  EXPECT_NE(error_of([&] { load_examples(dir.file("e.csv"), {}); }).find("no column 'text'"), std::string::npos);
  EXPECT_NE(error_of([&] { load_examples(dir.file("e.dat"), {}); }).find("--format"), std::string::npos);
}

TEST(HeadsData, SubsampleIsSeededAndBounded) {
  std::vector<Example> all;
  for (int i = 0; i < 50; ++i) all.push_back({std::to_string(i), "l", ""});
  auto a = subsample(all, 10, 1), b = subsample(all, 10, 1), c = subsample(all, 10, 2);
  ASSERT_EQ(a.size(), 10u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].text, b[i].text);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].text != c[i].text;
  EXPECT_TRUE(differs);
  EXPECT_EQ(subsample(all, 0, 1).size(), 50u);
}

}  // namespace
}  // namespace pocket::heads
