// The streaming JSON cursor (util/json_cursor.h) against nlohmann-json as
// the reference, and tokenizer.json loading through it: the same Vocab
// whatever the spelling of the file (escapes, merges as "a b" or [a, b],
// compact or pretty-printed), and one clear error for malformed text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <functional>
#include <random>

#include "common/test_util.h"
#include "tokenizer/hf_json.h"
#include "util/error.h"
#include "util/json_cursor.h"
#include "util/mapped_file.h"
#include "util/utf8.h"

namespace pocket {
namespace {

using json = nlohmann::json;

std::string read_string(const std::string& text) {
  JsonCursor c(text, "t.json");
  std::string out;
  c.read_string(out);
  EXPECT_TRUE(c.at_end()) << text;
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonCursor, StringsUnescapeLikeNlohmann) {
  for (const std::string text :
       {R"("plain")", R"("")", R"("a\"b\\c\/d\b\f\n\r\t")", R"("\u0120\u00e9\u4e2d")", R"("\ud83d\ude00 emoji")",
        "\"raw \xC4\xA0 \xE4\xB8\xAD \xF0\x9F\x98\x80\"", R"("\u0000 nul")", R"("mixed \u0041 and \u4E2D")"}) {
    EXPECT_EQ(read_string(text), json::parse(text).get<std::string>()) << text;
  }
}

TEST(JsonCursor, RandomStringsRoundTripThroughNlohmannDump) {
  // Random code points (all planes, controls included), dumped both raw and
  // with every non-ASCII character escaped (surrogate pairs above U+FFFF).
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = rng() % 0x80; break;
        case 1: cp = 0x80 + rng() % 0x780; break;
        case 2: cp = 0x800 + rng() % 0xF800; break;
        default: cp = 0x10000 + rng() % 0x100000; break;
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      utf8::append(s, cp);
    }
    const json j = s;
    EXPECT_EQ(read_string(j.dump()), s);
    EXPECT_EQ(read_string(j.dump(-1, ' ', true)), s);  // ensure_ascii
  }
}

TEST(JsonCursor, BadStringsFailWithPosition) {
  const std::pair<std::string, std::string> cases[] = {
      {"\"unterminated", "unterminated string"},
      {"\"bad \xFF byte\"", "invalid UTF-8"},
      {"\"overlong \xC0\xAF\"", "invalid UTF-8"},
      {"\"surrogate \xED\xA0\x80\"", "invalid UTF-8"},
      {"\"truncated \xE4\xB8\"", "invalid UTF-8"},
      {"\"tab\there\"", "control character"},
      {R"("\x41")", "bad escape"},
      {R"("\u12G4")", "bad \\u escape"},
      {R"("\ud83d alone")", "high surrogate"},
      {R"("\ude00")", "lone low surrogate"},
      {"\"ends with \\", "unterminated string"},
      {"42", "expected a string"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string& input = text;  // (clang 14 cannot capture a structured binding)
    const std::string msg = error_of([&] { read_string(input); });
    EXPECT_NE(msg.find(needle), std::string::npos) << text << " -> " << msg;
    EXPECT_NE(msg.find("t.json: invalid JSON at line 1 column"), std::string::npos) << msg;
  }
  // Lines and columns count from 1.
  const std::string msg = error_of([] {
    JsonCursor c("{\n  \"a\": \"x\xFF\"}", "t.json");
    c.members([&](const std::string&) {
      std::string v;
      c.read_string(v);
    });
  });
  EXPECT_NE(msg.find("line 2 column 10"), std::string::npos) << msg;
}

TEST(JsonCursor, Integers) {
  auto read = [](const std::string& text, int64_t& v) {
    JsonCursor c(text, "t.json");
    return c.read_integer(v);
  };
  int64_t v = 0;
  EXPECT_EQ(read(" 0", v), nullptr);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(read("151642", v), nullptr);
  EXPECT_EQ(v, 151642);
  EXPECT_EQ(read("-7,", v), nullptr);
  EXPECT_EQ(v, -7);
  EXPECT_EQ(read("999999999999999999", v), nullptr);
  EXPECT_EQ(v, 999999999999999999);
  for (const char* bad : {"1.5", "2e3", "1E3", "\"5\"", "-", "012", "1000000000000000000000", "true"})
    EXPECT_NE(read(bad, v), nullptr) << bad;
}

TEST(JsonCursor, SkipValueReturnsExactSpans) {
  const json doc = json::parse(R"({"a": [1, {"b": "]}"}, -2.5e3], "c": {"d": [[]]}, "e": null, "f": "x\"y", "g": true})");
  const std::string text = doc.dump(2);
  JsonCursor c(text, "t.json");
  c.members([&](const std::string& key) {
    const std::string_view span = c.skip_value();
    EXPECT_EQ(json::parse(span), doc[key]) << key << ": " << span;
  });
  EXPECT_TRUE(c.at_end());
}

TEST(JsonCursor, MismatchedOrEndlessNestingFails) {
  for (const std::string text : {"[1, 2}", "{\"a\": [}", "[[[[", "]"}) {
    const std::string msg = error_of([&] {
      JsonCursor c(text, "t.json");
      c.skip_value();
    });
    EXPECT_NE(msg.find("t.json: invalid JSON"), std::string::npos) << text << " -> " << msg;
  }
  // Hostile depth costs a byte per level, not a stack frame.
  const std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  JsonCursor c(deep, "t.json");
  EXPECT_EQ(c.skip_value().size(), deep.size());
}

// --- tokenizer.json through the streaming loader -------------------------

json small_tokenizer_copy() {
  return json::parse(read_text_file(pocket::test::gpt2_small_tokenizer()));
}

void expect_same_vocab(const Vocab& a, const Vocab& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.merge_ids, b.merge_ids);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.eos_ids, b.eos_ids);
}

TEST(HfJsonStream, SpellingDoesNotChangeTheVocab) {
  const json j = small_tokenizer_copy();
  const Vocab ref = vocab_from_hf_json_text(j.dump(1), "", "t.json", nullptr);
  ASSERT_GT(ref.merges.size(), 10u);
  ASSERT_EQ(ref.merge_ids.size(), ref.merges.size());
  // Compact, pretty, and every non-ASCII character escaped.
  expect_same_vocab(vocab_from_hf_json_text(j.dump(), "", "t.json", nullptr), ref);
  expect_same_vocab(vocab_from_hf_json_text(j.dump(4), "", "t.json", nullptr), ref);
  expect_same_vocab(vocab_from_hf_json_text(j.dump(-1, ' ', true), "", "t.json", nullptr), ref);
  // Merges as [a, b] pairs (newer tokenizers library), keys in another order.
  json pairs = j;
  for (auto& m : pairs["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  json reordered = json::object();
  for (const char* k : {"model", "decoder", "pre_tokenizer", "normalizer", "added_tokens", "version"})
    reordered[k] = pairs[k];
  expect_same_vocab(vocab_from_hf_json_text(pairs.dump(), "", "t.json", nullptr), ref);
  expect_same_vocab(vocab_from_hf_json_text(reordered.dump(2), "", "t.json", nullptr), ref);
}

TEST(HfJsonStream, RealQwen3FileMatchesTheDomReading) {
  // The DOM reading of the same file, by nlohmann, as the reference.
  const std::string path = pocket::test::qwen3_tokenizer_dir() + "/tokenizer.json";
  const json j = json::parse(read_text_file(path));
  const Vocab v = vocab_from_hf_json(path, "", nullptr);
  const json& vocab = j["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 151643u);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) ASSERT_EQ(v.tokens[it.value().get<size_t>()], it.key());
  const json& merges = j["model"]["merges"];
  ASSERT_EQ(v.merges.size(), merges.size());
  for (size_t r = 0; r < merges.size(); r += 97) {
    EXPECT_EQ(v.merges[r].first, merges[r][0].get<std::string>());
    EXPECT_EQ(v.merges[r].second, merges[r][1].get<std::string>());
  }
}

void expect_error(const std::string& text, const std::string& needle) {
  const std::string msg = error_of([&] { vocab_from_hf_json_text(text, "", "bad.json", nullptr); });
  EXPECT_NE(msg.find(needle), std::string::npos) << "wanted \"" << needle << "\", got: " << msg;
  EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
}

TEST(HfJsonStream, MalformedTextGivesOneClearError) {
  const std::string good = small_tokenizer_copy().dump();
  expect_error(good.substr(0, good.size() / 2), "invalid JSON");  // truncated mid-file
  expect_error(good + " x", "text after the top-level object");
  expect_error("", "invalid JSON");
  json j = small_tokenizer_copy();
  j["model"]["vocab"]["Ġa"] = 1.5;
  expect_error(j.dump(), "model.vocab[\"Ġa\"]: bad id: not an integer");
  j = small_tokenizer_copy();
  j["model"]["vocab"]["x"] = "7";
  expect_error(j.dump(), "model.vocab[\"x\"]: bad id");
  j = small_tokenizer_copy();
  j["model"]["merges"][2] = json::array({"a", "b", "c"});
  expect_error(j.dump(), "model.merges[2]: neither");
  j = small_tokenizer_copy();
  j["model"]["merges"][4] = 17;
  expect_error(j.dump(), "model.merges[4]: neither");
  j = small_tokenizer_copy();
  j["model"]["vocab"] = json::array();
  expect_error(j.dump(), "model.vocab: missing or not an object");
  j = small_tokenizer_copy();
  j["model"]["merges"] = "none";
  expect_error(j.dump(), "model.merges: missing or not an array");
  // A key the DOM parser would silently collapse is an error here.
  std::string dup = small_tokenizer_copy().dump();
  const size_t at = dup.find("\"merges\":");
  ASSERT_NE(at, std::string::npos);
  dup.insert(at, "\"merges\": [],");
  expect_error(dup, "\"model.merges\" appears twice");
  // Invalid UTF-8 inside a vocabulary key, and inside a small section.
  std::string bad = small_tokenizer_copy().dump();
  bad.replace(bad.find("\"vocab\":{\"") + 10, 0, "\xFF");
  expect_error(bad, "invalid UTF-8");
  std::string bad2 = small_tokenizer_copy().dump();
  bad2.replace(bad2.find("\"ByteLevel\""), 0, "\"\xC3\",");
  expect_error(bad2, "invalid JSON");
}

}  // namespace
}  // namespace pocket
