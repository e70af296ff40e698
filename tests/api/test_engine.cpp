// The public API, used the way an app would: only include/pocket/pocket.h.
#include <gtest/gtest.h>

#include <future>
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

TEST(Engine, ErrorsCarryTheirKind) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const pocket::Error& e) {
      return e.code();
    }
    ADD_FAILURE() << "no pocket::Error thrown";
    return pocket::ErrorCode::Failed;
  };
  auto opt = greedy(5);
  opt.temperature = -1;
  EXPECT_EQ(code_of([&] { engine->generate("x", opt); }), pocket::ErrorCode::InvalidArgument);
  EXPECT_EQ(code_of([&] { engine->set_threads(0); }), pocket::ErrorCode::InvalidArgument);
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += " Once upon a time";
  EXPECT_EQ(code_of([&] { engine->generate(long_prompt, greedy(5)); }), pocket::ErrorCode::ContextFull);
  EXPECT_EQ(code_of([] { pocket::Engine::open("/nonexistent/model.gguf"); }), pocket::ErrorCode::Failed);
  pocket::ModelOptions mo;
  mo.on_progress = [](float) { return false; };
  EXPECT_EQ(code_of([&] { pocket::SharedModel::open(pocket::test::stories_model(), mo); }),
            pocket::ErrorCode::Cancelled);
}

// One model, several engines: the same results as engines with their own
// model, and the engines are independent conversations.
TEST(Engine, EnginesShareOneModel) {
  auto model = pocket::SharedModel::open(pocket::test::stories_model());
  EXPECT_EQ(model->architecture(), "llama");
  EXPECT_EQ(model->vocab_size(), 512);
  auto a = pocket::Engine::create(model), b = pocket::Engine::create(model);
  EXPECT_EQ(a->model(), model);
  const std::string alone = pocket::Engine::open(pocket::test::stories_model())->chat("Once upon a time", greedy(10));
  EXPECT_EQ(a->chat("Once upon a time", greedy(10)), alone);
  pocket::GenerationStats sa, sb;
  a->chat(" Then", greedy(5), {}, &sa);
  EXPECT_EQ(b->chat("Once upon a time", greedy(10), {}, &sb), alone);
  EXPECT_GT(sa.reused_tokens, 0);
  EXPECT_EQ(sb.reused_tokens, 0) << "b's conversation is its own";
  EXPECT_EQ(model->tokenize("The cat"), a->tokenize("The cat"));
  EXPECT_THROW(pocket::Engine::create(nullptr), pocket::Error);
}

TEST(Engine, CancelFromAnotherThreadStopsTheRunningCallOnly) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  engine->cancel();  // nothing runs: no effect on the next call
  pocket::GenerationStats stats;
  engine->generate("Once upon a time", greedy(4), {}, &stats);
  EXPECT_EQ(stats.stop_reason, "max tokens");

  // The callback hands over to another thread at the third piece and waits
  // until that thread's cancel() has returned.
  std::promise<void> go, cancelled;
  std::thread canceller([&] {
    go.get_future().wait();
    engine->cancel();
    cancelled.set_value();
  });
  auto opt = greedy(100000);  // more than the context: only the cancel ends it early
  opt.ignore_eos = true;
  int pieces = 0;
  auto cancelled_future = cancelled.get_future();
  engine->generate("Once upon a time", opt,
                   [&](std::string_view) {
                     if (++pieces == 3) {
                       go.set_value();
                       cancelled_future.wait();
                     }
                     return true;
                   },
                   &stats);
  canceller.join();
  EXPECT_EQ(pieces, 3);
  EXPECT_EQ(stats.stop_reason, "cancelled");
  EXPECT_EQ(stats.generated_tokens, 3);
}

TEST(Engine, OneCallAtATimeAndThreadsCanChange) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  pocket::ErrorCode inner = pocket::ErrorCode::Failed;
  engine->generate("Once upon a time", greedy(3), [&](std::string_view) {
    try {
      engine->reset();
    } catch (const pocket::Error& e) {
      inner = e.code();
    }
    return true;
  });
  EXPECT_EQ(inner, pocket::ErrorCode::Busy);
  engine->set_threads(1);
  EXPECT_EQ(engine->threads(), 1);
  const std::string one = engine->generate("Once upon a time", greedy(16));
  engine->reset();
  engine->set_threads(3);
  EXPECT_EQ(engine->threads(), 3);
  EXPECT_EQ(engine->generate("Once upon a time", greedy(16)), one);
}

TEST(Engine, PrefillProgressAndLoadCallbacks) {
  std::vector<float> load;
  std::vector<std::string> logs;
  pocket::ModelOptions mo;
  mo.on_progress = [&](float p) {
    load.push_back(p);
    return true;
  };
  mo.on_log = [&](pocket::LogLevel, std::string_view m) { logs.emplace_back(m); };
  auto model = pocket::SharedModel::open(pocket::test::stories_model(), mo);
  ASSERT_FALSE(load.empty());
  EXPECT_EQ(load.front(), 0.0f);
  EXPECT_EQ(load.back(), 1.0f);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs[0].find("loaded"), std::string::npos) << logs[0];

  auto engine = pocket::Engine::create(model);
  std::string prompt;
  for (int i = 0; i < 30; ++i) prompt += " Once upon a time, there was a cat.";
  std::vector<float> seen;
  auto opt = greedy(4);
  opt.on_prefill_progress = [&](float p) {
    seen.push_back(p);
    return true;
  };
  pocket::GenerationStats stats;
  const std::string text = engine->generate(prompt, opt, {}, &stats);
  ASSERT_GT(stats.prompt_tokens, 128);
  EXPECT_EQ(seen.size(), static_cast<size_t>((stats.prompt_tokens + 127) / 128));
  EXPECT_EQ(seen.back(), 1.0f);
  engine->reset();
  EXPECT_EQ(engine->generate(prompt, greedy(4)), text) << "batching for progress changes nothing";
  engine->reset();
  opt.on_prefill_progress = [](float) { return false; };
  engine->generate(prompt, opt, {}, &stats);
  EXPECT_EQ(stats.stop_reason, "cancelled");
  EXPECT_EQ(stats.context_used, 128);
}

TEST(Engine, TokenizeRoundTrips) {
  auto engine = pocket::Engine::open(pocket::test::stories_model());
  auto ids = engine->tokenize("The cat sat.");
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(engine->detokenize(ids), "The cat sat.");
}

}  // namespace
