// GBNF: the suites in tests/data/constrain/gbnf (arithmetic, JSON, lists,
// Chinese text) on strings that must and must not match, the errors, and
// hostile input (bounded time and memory, clear errors).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "common/test_util.h"
#include "constrain/gbnf.h"
#include "match_util.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::constrain {
namespace {

using test::matches;

Grammar suite(const std::string& name) {
  return compile_gbnf(read_text_file(pocket::test::test_data_dir() + "/constrain/gbnf/" + name + ".gbnf"));
}

std::string gbnf_error(const std::string& text) {
  try {
    compile_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConstrainGbnf, Suites) {
  Grammar arith = suite("arithmetic");
  for (const char* ok : {"1+2*3", "(1.5-2)/-3", "((7))", "-(-4)"}) EXPECT_TRUE(matches(arith, ok)) << ok;
  for (const char* bad : {"1+", "(1", "1..2", "+1", ""}) EXPECT_FALSE(matches(arith, bad)) << bad;
  Grammar json = suite("json");
  for (const char* ok : {R"({"a": [1, {"b": null}], "c": "\u00e9\n"})", "{}", R"({"x":-0.5e+3})"})
    EXPECT_TRUE(matches(json, ok)) << ok;
  for (const char* bad : {R"({"a":})", "[1]", R"({"a":"x)", "{  }"}) EXPECT_FALSE(matches(json, bad)) << bad;
  Grammar list = suite("list");
  EXPECT_TRUE(matches(list, "- Milk\n- Eggs and ham\n"));
  EXPECT_FALSE(matches(list, "- milk\n- \n"));
  EXPECT_FALSE(matches(list, "- A\n- B\n- C\n- D\n- E\n- F\n"));  // at most 5
  Grammar zh = suite("chinese");
  EXPECT_TRUE(matches(zh, "你好，今天天气很好。我们去公园吧！"));
  EXPECT_FALSE(matches(zh, "你好，today。"));
  EXPECT_TRUE(test::is_prefix(zh, "您好，今\xE5"));  // a character split mid-way is a prefix
}

TEST(ConstrainGbnf, SyntaxOfLlamaCpp) {
  Grammar g = compile_gbnf(R"(
    # comment
    root ::= greeting ws name{1,2} "!"?   # trailing comment
    greeting ::= ( "hi" | "hello" )
    name ::= [A-Z] [a-z]* | "\x41\u00e9\U0001F600"
    ws ::= [ \t]+
  )");
  EXPECT_TRUE(matches(g, "hi Bob!"));
  EXPECT_TRUE(matches(g, "hello\tAnnBo"));
  EXPECT_TRUE(matches(g, "hi A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "hi bob"));
  Grammar neg = compile_gbnf(R"(root ::= [^a-c\]]{2} .)");
  EXPECT_TRUE(matches(neg, "dé中"));
  EXPECT_FALSE(matches(neg, "ab1"));
  EXPECT_FALSE(matches(neg, "]x1"));
}

TEST(ConstrainGbnf, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= foo", "rule 'foo' is used but never defined"},
      {"expr ::= \"a\"", "no 'root' rule"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left-recursive"},
      {"root ::= \"a\" root", "matches nothing"},
      {"root ::= [^\\x00-\\U0010FFFF]", "matches nothing"},
      {"root ::= \"abc", "unterminated string literal"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= (\"a\"", "missing ')'"},
      {"root ::= \"a\"{3,1}", "n < m"},
      {"root ::= \"a\" \nroot ::= \"b\"", "defined twice"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"\xFF\"", "invalid UTF-8"},
      {"root = \"a\"", "expected '::='"},
  };
  for (auto [text, want] : cases) {
    const std::string e = gbnf_error(text);
    EXPECT_NE(e.find(want), std::string::npos) << text << " gave: " << e;
  }
}

TEST(ConstrainGbnf, HostileInputIsBoundedAndClear) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(gbnf_error("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')')).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"{1000000}").find("too large"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"{0,99999999999999999999}").find("too large"), std::string::npos);
  // Counted repetitions stay one element each (the matcher keeps the count),
  // so 3000 of {0,9999} compile; of a nullable item they are written out as
  // rules: 30M elements, refused.
  std::string many = "root ::= x0\n", nullable = many;
  for (int i = 0; i < 3000; ++i) {  // appended piece by piece: GCC 12 misreports "x" + s + ... (-Wrestrict)
    const std::string a = std::to_string(i), b = std::to_string(i + 1);
    many.append("x").append(a).append(" ::= \"a\"{0,9999} x").append(b).append("\n");
    nullable.append("x").append(a).append(" ::= (\"a\"?){0,9999} x").append(b).append("\n");
  }
  many += "x3000 ::= \"b\"\n";
  nullable += "x3000 ::= \"b\"\n";
  EXPECT_EQ(gbnf_error(many), "");
  EXPECT_NE(gbnf_error(nullable).find("too large"), std::string::npos);
  std::mt19937 rng(3);
  const std::string alphabet = "root::=\"ab|()[]^-\\*+?{},0123456789 \n#.x";
  for (int i = 0; i < 3000; ++i) {  // random garbage: an error or a grammar, never a crash
    std::string text = "root ::= ";
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    try {
      compile_gbnf(text);
    } catch (const Error&) {
    }
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

}  // namespace
}  // namespace pocket::constrain
