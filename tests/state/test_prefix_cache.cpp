// A shared prompt prefix (issue 14): a session started from it holds exactly
// what prefilling the prefix would have written, continues with the same
// greedy tokens, and recomputes none of it.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "generate/session.h"
#include "runtime/loader.h"
#include "generate/prefix_cache.h"
#include "util/error.h"

namespace pocket {
namespace {

TEST(PrefixCache, SessionsStartedFromThePrefixContinueExactly) {
  LoadedModel m = load_model(test::stories_model());
  const std::vector<int32_t> prefix = m.tokenizer->encode("Once upon a time, there was a little girl named Lily. She");
  std::vector<int32_t> prompt = prefix;
  for (int32_t t : m.tokenizer->encode(" liked to play")) prompt.push_back(t);
  GenerateOptions greedy;
  greedy.max_tokens = 24;
  greedy.sampling.temperature = 0;

  Session owner(m.model, m.tokenizer, 256, 1);
  const PrefixCache shared(owner, prefix);
  EXPECT_EQ(owner.cached_tokens(), prefix);
  EXPECT_EQ(shared.tokens(), prefix);
  const GenerateResult expected = owner.generate(prompt, greedy);  // continues from the prefill
  EXPECT_EQ(expected.reused_tokens, static_cast<int>(prefix.size()));

  for (int i = 0; i < 2; ++i) {  // applied to several sessions, read-only
    Session s(m.model, m.tokenizer, 128, 2);
    shared.apply(s);
    EXPECT_EQ(s.cached_tokens(), prefix);
    const GenerateResult r = s.generate(prompt, greedy);
    EXPECT_EQ(r.tokens, expected.tokens);
    EXPECT_EQ(r.reused_tokens, static_cast<int>(prefix.size()));
  }
  // And a session that prefilled nothing in advance says the same.
  Session fresh(m.model, m.tokenizer, 128, 2);
  EXPECT_EQ(fresh.generate(prompt, greedy).tokens, expected.tokens);

  Session small(m.model, m.tokenizer, 8, 1);
  try {
    shared.apply(small);
    ADD_FAILURE() << "a prefix longer than the context was applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the shared prefix"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(small.cached_tokens().empty());
}

}  // namespace
}  // namespace pocket

// The same through the C++ API: a system prompt prefilled once, shared.
#include "pocket/pocket.h"

namespace pocket {
namespace {

TEST(PrefixCache, EnginesShareAPrefilledSystemPrompt) {
  auto model = SharedModel::open(test::stories_model());
  EngineOptions eo;
  eo.system_prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.";
  eo.threads = 1;
  GenerationOptions greedy;
  greedy.max_tokens = 20;
  greedy.temperature = 0;

  auto plain = Engine::create(model, eo);
  GenerationStats plain_stats;
  const std::string expected = plain->chat("One day", greedy, {}, &plain_stats);

  auto owner = Engine::create(model, eo);
  auto prefix = owner->share_chat_start();
  ASSERT_GT(prefix->tokens(), 10);
  EXPECT_GT(prefix->bytes(), 0u);
  for (int i = 0; i < 2; ++i) {
    auto e = Engine::create(model, eo);
    e->use_prefix(*prefix);
    GenerationStats stats;
    EXPECT_EQ(e->chat("One day", greedy, {}, &stats), expected);
    EXPECT_EQ(stats.reused_tokens, prefix->tokens());
    EXPECT_EQ(stats.prompt_tokens, plain_stats.prompt_tokens);
  }
  EXPECT_EQ(owner->chat("One day", greedy), expected);

  EngineOptions tiny = eo;
  tiny.context = 8;
  auto small = Engine::create(model, tiny);
  EXPECT_THROW(small->use_prefix(*prefix), Error);
}

}  // namespace
}  // namespace pocket

// And through the C API.
#include "pocket/pocket_c.h"

namespace pocket {
namespace {

TEST(PrefixCache, CApiSharesTheChatStart) {
  pocket_model* model = nullptr;
  ASSERT_EQ(pocket_model_open(test::stories_model().c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.system_prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.";
  so.threads = 1;
  pocket_session* s[3] = {};
  for (auto& h : s) ASSERT_EQ(pocket_session_open(model, &so, &h), POCKET_OK) << pocket_last_error();
  pocket_generate_options go;
  pocket_generate_options_init(&go);
  go.max_tokens = 16;
  go.temperature = 0;
  struct Text {
    std::string s;
    static int fn(const char* piece, size_t n, void* self) {
      static_cast<Text*>(self)->s.append(piece, n);
      return 0;
    }
  };
  Text plain;
  ASSERT_EQ(pocket_session_chat(s[0], "One day", &go, Text::fn, &plain, nullptr), POCKET_OK) << pocket_last_error();

  pocket_session* targets[2] = {s[1], s[2]};
  ASSERT_EQ(pocket_session_share_chat_start(s[0], targets, 2), POCKET_OK) << pocket_last_error();
  for (pocket_session* t : targets) {
    Text got;
    pocket_stats st;
    st.struct_size = sizeof st;
    ASSERT_EQ(pocket_session_chat(t, "One day", &go, Text::fn, &got, &st), POCKET_OK) << pocket_last_error();
    EXPECT_EQ(got.s, plain.s);
    EXPECT_GT(st.reused_tokens, 10);  // the system prompt was not prefilled again
  }
  EXPECT_EQ(pocket_session_share_chat_start(s[0], nullptr, 1), POCKET_ERR_INVALID_ARGUMENT);
  pocket_session* closed[1] = {nullptr};
  EXPECT_EQ(pocket_session_share_chat_start(s[0], closed, 1), POCKET_ERR_INVALID_HANDLE);
  for (auto& h : s) pocket_session_close(h);
  pocket_model_close(model);
}

}  // namespace
}  // namespace pocket
