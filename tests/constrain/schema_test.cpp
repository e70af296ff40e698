// JSON Schema compilation: what matches, what does not, and the errors
// (naming the keyword and its JSON pointer) for what is not supported.
#include <gtest/gtest.h>

#include <random>

#include "constrain/json_schema.h"
#include "match_util.h"
#include "util/error.h"

namespace pocket::constrain {
namespace {

using test::matches;

Grammar schema(const std::string& s, int ws = 0) {
  JsonOptions o;
  o.max_ws = ws;
  return compile_json_schema(s, o);
}

std::string schema_error(const std::string& s) {
  try {
    schema(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConstrainSchema, ObjectsFollowPropertiesRequiredAndStrictness) {
  Grammar g = schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})");
  EXPECT_TRUE(matches(g, R"({"b":"x"})"));
  EXPECT_TRUE(matches(g, R"({"a":-12,"b":""})"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));           // b required
  EXPECT_FALSE(matches(g, R"({"b":"x","c":1})"));   // strict: no additional properties
  EXPECT_FALSE(matches(g, R"({ "b":"x"})"));        // compact by default
  EXPECT_FALSE(matches(g, R"({"a":01,"b":"x"})"));  // no leading zeros
  Grammar open = schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})");
  EXPECT_TRUE(matches(open, R"({"a":1,"zz":true,"ab":false})"));
  EXPECT_FALSE(matches(open, R"({"a":1,"zz":3})"));
  EXPECT_FALSE(matches(open, R"({"a":1,"a":true})"));  // an additional key never repeats a declared one
  EXPECT_TRUE(matches(open, R"({"aa":true,"":false})"));
}

TEST(ConstrainSchema, WhitespaceIsBoundedWhenAllowed) {
  Grammar g = schema(R"({"type":"array","items":{"type":"integer"}})", 2);
  EXPECT_TRUE(matches(g, "[ 1,\n 2 ]"));
  EXPECT_FALSE(matches(g, "[   1]"));  // three spaces: more than allowed
}

TEST(ConstrainSchema, StringsEnumsConstAndFormats) {
  EXPECT_TRUE(matches(schema(R"({"type":"string","minLength":2,"maxLength":3})"), "\"\xE4\xB8\xAD\\n\""));
  EXPECT_FALSE(matches(schema(R"({"type":"string","maxLength":1})"), "\"ab\""));
  EXPECT_FALSE(matches(schema(R"({"type":"string"})"), "\"a\nb\""));  // raw control character
  Grammar e = schema(R"({"enum":["red",1,null,{"k":[true]}]})");
  for (const char* ok : {"\"red\"", "1", "null", R"({"k":[true]})"}) EXPECT_TRUE(matches(e, ok)) << ok;
  EXPECT_FALSE(matches(e, "\"blue\""));
  Grammar f = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(matches(f, "\"2024-02-28\""));
  EXPECT_FALSE(matches(f, "\"2024-02-30\""));
  EXPECT_FALSE(matches(f, "\"0000-01-01\""));
  Grammar ip = schema(R"({"type":"string","format":"ipv4"})");
  EXPECT_TRUE(matches(ip, "\"192.168.0.255\""));
  EXPECT_FALSE(matches(ip, "\"256.1.1.1\""));
  EXPECT_FALSE(matches(ip, "\"01.1.1.1\""));
  Grammar p = schema(R"({"type":"string","pattern":"[0-9]{3}"})");  // unanchored: search semantics
  EXPECT_TRUE(matches(p, "\"ab123cd\""));
  EXPECT_FALSE(matches(p, "\"ab12\""));
  Grammar q = schema(R"({"type":"string","pattern":"^a\"b$"})");  // the quote is escaped in JSON
  EXPECT_TRUE(matches(q, R"("a\"b")"));
}

TEST(ConstrainSchema, IntegerRangesMatchExactlyTheNumbersInRange) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    long long lo = static_cast<long long>(rng() % 2000) - 1000, hi = lo + static_cast<long long>(rng() % 1500);
    Grammar g = schema("{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) + ",\"maximum\":" + std::to_string(hi) + "}");
    for (long long x = lo - 30; x <= hi + 30; x += 1 + static_cast<long long>(rng() % 7))
      ASSERT_EQ(matches(g, std::to_string(x)), x >= lo && x <= hi) << lo << ".." << hi << " x=" << x;
  }
  Grammar ex = schema(R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})");
  EXPECT_FALSE(matches(ex, "0"));
  EXPECT_TRUE(matches(ex, "9"));
  EXPECT_FALSE(matches(ex, "10"));
  Grammar num = schema(R"({"type":"number","minimum":-2,"maximum":5})");
  for (const char* ok : {"5", "5.00", "-2", "-1.99", "0.5", "4.999", "-0.0"}) EXPECT_TRUE(matches(num, ok)) << ok;
  for (const char* bad : {"5.01", "-2.5", "6", "1e3"}) EXPECT_FALSE(matches(num, bad)) << bad;
}

// Found when sampling without a sort reached other tokens: "2e414" was a
// JSON number of the grammar, which nlohmann refuses and Python reads as
// inf. Numbers now stay finite as doubles (16 integer digits, a two-digit
// exponent).
TEST(ConstrainSchema, NumbersStayFiniteAsDoubles) {
  for (const char* spec : {R"({"type":"number"})", R"({"type":"array","items":{}})"}) {
    Grammar g = schema(spec);
    const bool array = std::string(spec).find("array") != std::string::npos;
    auto m = [&](const std::string& x) { return matches(g, array ? "[" + x + "]" : x); };
    for (const char* ok : {"0", "-1.5e99", "9999999999999999.9999999999999999E-99", "1e+09"}) EXPECT_TRUE(m(ok)) << ok;
    for (const char* bad : {"2e414", "1e100", "1E-100", "10000000000000000", "01"}) EXPECT_FALSE(m(bad)) << bad;
  }
}

TEST(ConstrainSchema, ArraysUnionsRefsAndRecursion) {
  Grammar a = schema(R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})");
  EXPECT_FALSE(matches(a, "[]"));
  EXPECT_TRUE(matches(a, "[true,false]"));
  EXPECT_FALSE(matches(a, "[true,false,true]"));
  Grammar t = schema(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})");
  EXPECT_TRUE(matches(t, "[1,\"a\"]"));
  EXPECT_FALSE(matches(t, "[1,\"a\",2]"));
  Grammar u = schema(R"({"type":["integer","null"]})");
  EXPECT_TRUE(matches(u, "null"));
  EXPECT_TRUE(matches(u, "-3"));
  Grammar r = schema(R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}},
                         "required":["c"]}},"$ref":"#/$defs/n"})");
  EXPECT_TRUE(matches(r, R"({"c":[{"c":[]},{"c":[{"c":[]}]}]})"));
  EXPECT_FALSE(matches(r, R"({"c":[{}]})"));
  Grammar all = schema(R"({"allOf":[{"properties":{"a":{"const":1}},"required":["a"]},{"properties":{"b":{"const":2}}}]})");
  EXPECT_TRUE(matches(all, R"({"a":1,"b":2})"));
  EXPECT_TRUE(matches(all, R"({"a":1})"));
  Grammar any = schema("{}");
  EXPECT_TRUE(matches(any, R"({"x":[1,2.5e3,"s",null,{"y":false}]})"));
  EXPECT_FALSE(matches(any, R"({"x":})"));
}

TEST(ConstrainSchema, UnsupportedOrImpossibleSchemasNameTheKeywordAndPointer) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems' at /uniqueItems"},
      {R"({"properties":{"a":{"type":"string","not":{}}}})", "unsupported keyword 'not' at /properties/a/not"},
      {R"({"properties":{"a/b":{"multipleOf":2}}})", "at /properties/a~1b/multipleOf"},
      {R"({"type":"string","format":"hostname"})", "unsupported format 'hostname' at /format"},
      {R"({"$ref":"http://x/y.json"})", "only local references"},
      {R"({"$ref":"#/$defs/missing"})", "points to nothing"},
      {R"({"type":"number","minimum":0.5})", "non-integral bounds"},
      {R"({"type":"integer","minimum":5,"maximum":1})", "no number fits"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "no string fits at /maxLength"},
      {R"({"type":"object","properties":{"a":false},"required":["a"]})", "matches nothing"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "matches nothing"},
      {R"({"type":"strin"})", "unknown type 'strin' at /type"},
      {R"({"required":["x"]})", "required property 'x' is not in properties"},
      {R"x({"type":"string","pattern":"(?=a)"})x", "look-around"},
      {"{\"type\": ", "not valid JSON"},
  };
  for (auto [s, want] : cases) {
    const std::string e = schema_error(s);
    EXPECT_NE(e.find(want), std::string::npos) << s << " gave: " << e;
  }
}

TEST(ConstrainSchema, HostileSchemasFailClearlyAndQuickly) {
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 5000; ++i) deep += "}";
  EXPECT_NE(schema_error(deep).find("nested too deeply"), std::string::npos);
  std::string big = R"({"enum":[)";
  for (int i = 0; i < 20000; ++i) big.append(i ? "," : "").append(std::to_string(i));  // GCC 12: see gbnf_test.cpp
  big += "]}";
  EXPECT_NE(schema_error(big).find("too many values"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","maxLength":100000000})").find("too large"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","pattern":"a{99999}"})").find("too large"), std::string::npos);
  // Nested counts share their inner rule: compact, not an error.
  EXPECT_EQ(schema_error(R"x({"type":"string","pattern":"^(a{9000}){0,9000}$"})x"), "");
}

}  // namespace
}  // namespace pocket::constrain
