// Generation sessions on the real stories260K model: KV reuse across turns,
// stop conditions and context limits.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "generate/chat_session.h"
#include "generate/session.h"
#include "runtime/loader.h"
#include "util/error.h"

namespace pocket {
namespace {

const LoadedModel& stories() {
  static LoadedModel m = load_model(test::stories_model());
  return m;
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  return o;
}

TEST(Session, SecondTurnReusesTheCacheAndMatchesAFreshRun) {
  const LoadedModel& m = stories();
  Session session(m.model, m.tokenizer, 512, 2);
  ChatSession chat(session, ChatTemplate(ChatFormat::Raw));
  auto first = chat.send("Once upon a time", greedy(20));
  const int after_first = static_cast<int>(chat.tokens().size());
  const int cached = static_cast<int>(session.cached_tokens().size());
  // The cache holds the whole first turn except its last sampled token and
  // the tokens that close the reply.
  EXPECT_GE(cached, after_first - 3);
  auto second = chat.send(" The next day", greedy(20));
  EXPECT_EQ(second.reused_tokens, cached);

  // A fresh session given the same whole conversation produces the same reply.
  std::vector<int32_t> convo(chat.tokens().begin(), chat.tokens().begin() + second.prompt_tokens);
  Session fresh(m.model, m.tokenizer, 512, 1);
  auto again = fresh.generate(convo, greedy(20));
  EXPECT_EQ(again.reused_tokens, 0);
  EXPECT_EQ(again.tokens, second.tokens);
}

TEST(Session, StopsAtStopStringMaxTokensAndEos) {
  const LoadedModel& m = stories();
  Session session(m.model, m.tokenizer, 512, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  auto prompt = m.tokenizer->encode("Once upon a time", eo);
  auto opt = greedy(100);
  opt.stop_strings = {"Lily"};
  auto r = session.generate(prompt, opt);
  EXPECT_EQ(r.stop, GenerateResult::Stop::StopString);
  EXPECT_EQ(r.text, ", there was a little girl named ");

  auto r2 = session.generate(prompt, greedy(7));
  EXPECT_EQ(r2.stop, GenerateResult::Stop::MaxTokens);
  EXPECT_EQ(r2.tokens.size(), 7u);

  // Stories end when the model samples BOS (llama2.c's delimiter).
  auto sampled = greedy(500);
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.seed = 1;
  auto r3 = session.generate(prompt, sampled);
  EXPECT_EQ(r3.stop, GenerateResult::Stop::Eos);
  EXPECT_TRUE(m.tokenizer->is_eos(r3.eos_token));
  EXPECT_LT(r3.tokens.size(), 500u);
}

TEST(Session, PromptLongerThanTheContextIsAClearError) {
  const LoadedModel& m = stories();
  Session session(m.model, m.tokenizer, 16, 1);
  std::string text;
  for (int i = 0; i < 40; ++i) text += " the cat";
  auto prompt = m.tokenizer->encode(text);
  try {
    session.generate(prompt, greedy(4));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
  // The session is still usable afterwards.
  auto ok = session.generate(m.tokenizer->encode("Once"), greedy(3));
  EXPECT_EQ(ok.tokens.size(), 3u);
}

TEST(Session, GenerationFillingTheContextStopsCleanly) {
  const LoadedModel& m = stories();
  Session session(m.model, m.tokenizer, 24, 1);
  auto opt = greedy(100);
  opt.stop_at_eos = false;
  auto r = session.generate(m.tokenizer->encode("Once upon a time"), opt);
  EXPECT_EQ(r.stop, GenerateResult::Stop::ContextFull);
  EXPECT_LE(session.cached_tokens().size(), 24u);
}

}  // namespace
}  // namespace pocket
