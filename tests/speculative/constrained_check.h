// Constrained speculative decoding against constrained plain decoding, for
// any drafter: greedy output token for token (text, stop reason, whether the
// constraint completed), and every completed output checked by a validator
// independent of the matcher (JSON Schema by tests/constrain's validator,
// regex by std::regex, choices by membership, JSON by parsing).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/mini_validator.h"
#include "generate/session.h"
#include "speculative/speculative.h"

namespace pocket::test {

struct ConstraintCase {
  constrain::ConstraintSpec spec;
  std::shared_ptr<const constrain::Constraint> compiled;
};

// One constraint of each kind, compiled for `tok` (a byte-complete
// vocabulary: stories260K's or the synthetic byte-level one).
inline std::vector<ConstraintCase> constraint_cases(const Tokenizer& tok) {
  using Kind = constrain::ConstraintSpec::Kind;
  std::vector<ConstraintCase> out;
  auto add = [&](Kind k, std::string text, std::vector<std::string> choices = {}) {
    constrain::ConstraintSpec s;
    s.kind = k;
    s.text = std::move(text);
    s.choices = std::move(choices);
    out.push_back({s, constrain::compile_constraint(s, tok)});
  };
  add(Kind::JsonSchema,
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},)"
      R"("tags":{"type":"array","items":{"enum":["a","bb","ccc"]},"maxItems":3}},"required":["name","age","tags"]})");
  add(Kind::Regex, "(the|a|one) [a-z]{1,6}( [a-z]{1,6}){0,5}\\.");
  add(Kind::Choice, "", {"yes", "no", "maybe not"});
  add(Kind::Json, "");
  return out;
}

// Whether `text` satisfies the case's constraint, checked without the matcher.
inline bool satisfies(const ConstraintCase& c, const std::string& text, std::string& why) {
  using Kind = constrain::ConstraintSpec::Kind;
  using constrain::test::ojson;
  switch (c.spec.kind) {
    case Kind::JsonSchema: {
      const ojson schema = ojson::parse(c.spec.text);
      const ojson v = ojson::parse(text, nullptr, false);
      if (v.is_discarded()) return (why = "not JSON"), false;
      return constrain::test::validate(v, schema, schema, why);
    }
    case Kind::Regex:
      return std::regex_match(text, std::regex(c.spec.text)) || ((why = "no regex match"), false);
    case Kind::Choice:
      return std::find(c.spec.choices.begin(), c.spec.choices.end(), text) != c.spec.choices.end() ||
             ((why = "not a choice"), false);
    case Kind::Json:
      try {
        return !ojson::parse(text).is_discarded();  // parse throws on invalid text
      } catch (const ojson::out_of_range&) {  // a number past double's range ("44E444"): valid JSON
        return true;
      } catch (const ojson::exception& e) {
        return (why = e.what()), false;
      }
    default:
      return (why = "unexpected kind"), false;
  }
}

struct ConstrainedTotals {
  int drafted = 0, accepted = 0, complete = 0, runs = 0;
};

// For each constraint case: plain constrained greedy generation, then the
// speculative one with `drafter` at each block size (not adaptive, so every
// draft is verified); expects the same result and a valid completed output.
inline ConstrainedTotals expect_constrained_greedy_as_plain(Session& s, Drafter& drafter,
                                                             const std::vector<int32_t>& input,
                                                             const std::vector<ConstraintCase>& cases, int n_tokens,
                                                             const std::vector<int>& blocks) {
  ConstrainedTotals t;
  for (const auto& c : cases) {
    GenerateOptions o;
    o.max_tokens = n_tokens;
    o.sampling.temperature = 0;
    o.constraint = c.compiled;
    s.reset();
    const GenerateResult want = s.generate(input, o);
    const std::string what = std::string(constrain::kind_name(c.spec.kind)) + " with " + drafter.name();
    for (int k : blocks) {
      SpeculativeStats st;
      s.reset();
      const GenerateResult got = generate_speculative(s, drafter, input, o, {k, false}, {}, &st);
      EXPECT_EQ(got.tokens, want.tokens) << what << " k=" << k;
      EXPECT_EQ(got.text, want.text) << what << " k=" << k;
      EXPECT_EQ(got.stop, want.stop) << what << " k=" << k << ": " << stop_reason_name(got.stop) << " vs "
                                     << stop_reason_name(want.stop);
      EXPECT_TRUE(got.constraint_used);
      EXPECT_EQ(got.constraint_complete, want.constraint_complete) << what << " k=" << k;
      if (got.constraint_complete) {
        std::string why;
        EXPECT_TRUE(satisfies(c, got.text, why)) << what << ": " << why << " in '" << got.text << "'";
        ++t.complete;
      }
      t.drafted += st.drafted;
      t.accepted += st.accepted;
      ++t.runs;
    }
  }
  return t;
}

}  // namespace pocket::test
