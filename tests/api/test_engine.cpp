// The public API, used the way an app would: only include/pocket/pocket.h.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "pocket/pocket.h"

namespace {

pocket::GenerationOptions greedy(int n) {
  pocket::GenerationOptions o;
  o.max_tokens = n;
  o.temperature = 0;
  return o;
}

TEST(Engine, GeneratesTheKnownStoryAndStreamsIt) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  EXPECT_EQ(engine->architecture(), "llama");
  EXPECT_EQ(engine->vocab_size(), 512);
  std::string streamed;
  pocket::GenerationStats stats;
  std::string text = engine->generate("Once upon a time", greedy(12),
                                      [&](std::string_view piece) {
                                        streamed += piece;
                                        return true;
                                      },
                                      &stats);
  EXPECT_EQ(text, ", there was a little girl named Lily. She");  // tests/data/model golden
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(stats.generated_tokens, 12);
  EXPECT_EQ(stats.stop_reason, "max tokens");
}

TEST(Engine, ChatReusesEarlierTurnsAndResetForgetsThem) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  pocket::GenerationStats s1, s2, s3;
  engine->chat("Once upon a time", greedy(10), {}, &s1);
  engine->chat(" Then", greedy(10), {}, &s2);
  EXPECT_EQ(s1.reused_tokens, 0);
  EXPECT_GT(s2.reused_tokens, s1.prompt_tokens);
  engine->reset();
  engine->chat("Once upon a time", greedy(10), {}, &s3);
  EXPECT_EQ(s3.reused_tokens, 0);
}

TEST(Engine, CallbackCanStopGeneration) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  int calls = 0;
  pocket::GenerationStats stats;
  engine->generate("Once upon a time", greedy(50), [&](std::string_view) { return ++calls < 3; }, &stats);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(stats.stop_reason, "stopped by caller");
}

// Apps open several engines (a chat and a background classifier, say) and
// drive them from their own threads, each engine with its own worker pool.
// Run under ThreadSanitizer by scripts/test.sh (stage tsan): shared state
// such as the kernel tables and tokenizer caches must be race-free.
TEST(Engine, ConcurrentEnginesMatchASequentialRun) {
  pocket::EngineOptions two_threads;
  two_threads.threads = 2;
  const std::string expected =
      pocket::Engine::open(pocket::test::stories_model(), two_threads)->generate("Once upon a time", greedy(24));
  constexpr int kEngines = 3;
  std::vector<std::string> got(kEngines);
  std::vector<std::thread> threads;
  for (int i = 0; i < kEngines; ++i)
    threads.emplace_back([&, i] {
      auto engine = pocket::Engine::open(pocket::test::stories_model(), two_threads);
      for (int round = 0; round < 2; ++round) got[i] = engine->generate("Once upon a time", greedy(24));
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kEngines; ++i) EXPECT_EQ(got[i], expected) << "engine " << i;
}

TEST(Engine, BadPathsAndOptionsThrowPocketError) {
  EXPECT_THROW(pocket::Engine::open("/nonexistent/model.gguf"), pocket::Error);
  pocket::EngineOptions bad_ctx;
  bad_ctx.context = 1 << 20;
  EXPECT_THROW(pocket::Engine::open(pocket::test::stories_model(), bad_ctx), pocket::Error);
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  auto opt = greedy(5);
  opt.top_p = 2.0f;
  EXPECT_THROW(engine->generate("x", opt), pocket::Error);
}

TEST(Engine, TokenizeRoundTrips) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  auto ids = engine->tokenize("The cat sat.");
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(engine->detokenize(ids), "The cat sat.");
}

}  // namespace
