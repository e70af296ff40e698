// The constraint through the public APIs: the C API's appended
// pocket_generate_options fields and pocket_stats.constraint_complete, and
// the C++ Engine's GenerationOptions::constraint.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "pocket/pocket.h"
#include "pocket/pocket_c.h"

namespace {

int collect(const char* piece, size_t length, void* user) {
  static_cast<std::string*>(user)->append(piece, length);
  return 0;
}

// stories260K and one session on it, closed at the end of the test.
struct Opened {
  pocket_model* model = nullptr;
  pocket_session* session = nullptr;
  Opened() {
    if (pocket_model_open(pocket::test::stories_model().c_str(), nullptr, &model) == POCKET_OK)
      pocket_session_open(model, nullptr, &session);
  }
  ~Opened() {
    EXPECT_EQ(pocket_session_close(session), POCKET_OK);
    EXPECT_EQ(pocket_model_close(model), POCKET_OK);
  }
  bool ok() const { return session != nullptr; }
};

TEST(ConstrainApi, CChoiceSchemaAndErrors) {
  Opened opened;
  ASSERT_TRUE(opened.ok()) << pocket_last_error();
  pocket_session* session = opened.session;
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  EXPECT_EQ(o.constraint_kind, nullptr);
  const char* choices[] = {"cat", "dog", "bird"};
  o.constraint_kind = "choice";
  o.choices = choices;
  o.n_choices = 3;
  o.seed = 3;
  pocket_stats st;
  st.struct_size = sizeof st;
  std::string text;
  ASSERT_EQ(pocket_session_generate(session, "Once upon a time", &o, collect, &text, &st), POCKET_OK) << pocket_last_error();
  EXPECT_TRUE(text == "cat" || text == "dog" || text == "bird") << text;
  EXPECT_EQ(st.constraint_complete, 1);
  EXPECT_TRUE(st.stop_reason == POCKET_STOP_CONSTRAINT || st.stop_reason == POCKET_STOP_EOS) << st.stop_reason;

  o.constraint_kind = "json-schema";
  o.constraint_text = R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]})";
  text.clear();
  ASSERT_EQ(pocket_session_generate(session, "Once upon a time", &o, collect, &text, &st), POCKET_OK) << pocket_last_error();
  auto v = nlohmann::json::parse(text);
  EXPECT_GE(v["n"].get<int>(), 1);
  EXPECT_LE(v["n"].get<int>(), 9);

  o.constraint_text = R"({"type":"array","uniqueItems":true})";
  EXPECT_EQ(pocket_session_generate(session, "x", &o, collect, &text, &st), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pocket_last_error()).find("unsupported keyword 'uniqueItems' at /uniqueItems"), std::string::npos)
      << pocket_last_error();
  o.constraint_text = R"({"type":"integer"})";
  o.json_whitespace = 99;
  EXPECT_EQ(pocket_session_generate(session, "x", &o, collect, &text, &st), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pocket_last_error()).find("JSON whitespace limit 99 must be in [0, 64]"), std::string::npos)
      << pocket_last_error();
  o.json_whitespace = 0;
  o.constraint_kind = "yaml";
  EXPECT_EQ(pocket_session_generate(session, "x", &o, collect, &text, &st), POCKET_ERR_INVALID_ARGUMENT);
  o.constraint_kind = "choice";
  o.choices = nullptr;
  EXPECT_EQ(pocket_session_generate(session, "x", &o, collect, &text, &st), POCKET_ERR_INVALID_ARGUMENT);
}

// An app built against the header before the constraint fields were
// appended sends the older sizes (72 and 40 bytes): it keeps working, the
// fields it lacks take their defaults (no constraint) and nothing is written
// past its stats; a size between two versions is refused.
TEST(ConstrainApi, COlderStructSizesStillWork) {
  Opened opened;
  ASSERT_TRUE(opened.ok()) << pocket_last_error();
  pocket_session* session = opened.session;
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  // Set as a newer caller would, then cut to the old size: must be ignored.
  o.constraint_kind = "json-schema";
  o.constraint_text = "not a schema";
  o.struct_size = offsetof(pocket_generate_options, constraint_kind);
  o.max_tokens = 4;
  o.temperature = 0;
  pocket_stats st;
  std::memset(&st, 0xab, sizeof st);
  st.struct_size = offsetof(pocket_stats, constraint_complete);
  std::string text;
  ASSERT_EQ(pocket_session_generate(session, "Once upon a time", &o, collect, &text, &st), POCKET_OK)
      << pocket_last_error();
  EXPECT_EQ(st.generated_tokens, 4);
  EXPECT_EQ(st.struct_size, offsetof(pocket_stats, constraint_complete));
  const auto* tail = reinterpret_cast<const unsigned char*>(&st) + offsetof(pocket_stats, constraint_complete);
  for (size_t i = 0; i < sizeof(pocket_stats) - offsetof(pocket_stats, constraint_complete); ++i)
    EXPECT_EQ(tail[i], 0xab) << "byte " << i << " past the old pocket_stats was written";

  o.struct_size = offsetof(pocket_generate_options, constraint_kind) + 8;
  EXPECT_EQ(pocket_session_generate(session, "x", &o, collect, &text, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pocket_last_error()).find("not the size of any version of the struct (72, 104, 112 bytes)"),
            std::string::npos)
      << pocket_last_error();
}

// json_open reaches the schema compiler: an object listing only "a" takes
// no other key when closed (the default), and lets others in when open.
TEST(ConstrainApi, CJsonOpenAllowsPropertiesTheSchemaDoesNotList) {
  Opened opened;
  ASSERT_TRUE(opened.ok()) << pocket_last_error();
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  EXPECT_EQ(o.json_open, 0);
  o.constraint_kind = "json-schema";
  o.constraint_text = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  o.max_tokens = 12;
  o.temperature = 1.5f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  int other_keys = 0;
  for (int open = 0; open < 2; ++open)
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      o.json_open = open;
      o.seed = seed;
      std::string text;
      ASSERT_EQ(pocket_session_generate(opened.session, "Once upon a time", &o, collect, &text, nullptr), POCKET_OK)
          << pocket_last_error();
      const bool other = text.starts_with("{\"") && !text.starts_with("{\"a\"");
      if (!open) {
        EXPECT_FALSE(other) << "seed " << seed << ": " << text;
      } else {
        other_keys += other;
      }
    }
  EXPECT_GT(other_keys, 0) << "no open-object output had another key: json_open did not reach the compiler";
}

TEST(ConstrainApi, CppEngineRegexInChat) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  pocket::GenerationOptions o;
  o.constraint.kind = "regex";
  o.constraint.text = "(Yes|No), because [a-z ]{1,20}\\.";
  o.max_tokens = 40;
  pocket::GenerationStats st;
  std::string out = engine->chat("Is the sky blue?", o, {}, &st);
  if (st.constraint_complete) {
    EXPECT_TRUE(out.starts_with("Yes, because ") || out.starts_with("No, because ")) << out;
    EXPECT_TRUE(out.ends_with(".")) << out;
  } else {
    EXPECT_EQ(st.stop_reason, "max tokens");
  }
}

}  // namespace
