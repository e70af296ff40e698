// The memory plan (src/budget): the KV size it counts is what KVCache
// reserves, the context it chooses is the largest that fits, a budget too
// small is refused with the numbers, and the Engine API honours it.
#include <gtest/gtest.h>

#include <string>

#include "budget/memory_plan.h"
#include "common/test_util.h"
#include "formats/model_file.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"
#include "pocket/pocket.h"
#include "runtime/loader.h"

namespace pocket {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(MemoryPlan, KvBytesAreWhatTheCacheReserves) {
  for (const char* preset : {"tiny-qwen3", "tiny-gemma3", "pocket-0.3b", "gemma3-270m"}) {
    const ModelConfig cfg = preset_config(preset);
    for (int n : {1, 64, 300, 1000}) {
      if (n > cfg.max_seq_len) continue;
      KVCache cache(cfg, n);
      EXPECT_EQ(kv_cache_bytes(cfg, n, KVType::F16), cache.reserved_bytes()) << preset << " at " << n;
    }
    EXPECT_EQ(kv_bytes_per_token(cfg, KVType::F16), 4ull * cfg.n_layers * cfg.kv_dim()) << preset;
  }
}

TEST(MemoryPlan, ChoosesTheLargestContextThatFits) {
  const ModelFile file = open_model(test::stories_model());
  MemoryRequest r;
  r.threads = 2;
  r.max_context = resolve_context(0, file.config);
  for (int target : {80, 200, 333}) {
    // A budget a little above what `target` tokens need.
    r.budget_mb = static_cast<int>(memory_for(file, file.vocab, r, target).peak() / kMiB) + 1;
    const MemoryPlan p = plan_memory(file, file.vocab, r);
    EXPECT_TRUE(p.context_chosen);
    EXPECT_LE(p.peak(), uint64_t(r.budget_mb) * kMiB);
    EXPECT_GE(p.context, target);
    if (p.context < r.max_context) {
      EXPECT_GT(memory_for(file, file.vocab, r, p.context + 1).peak(), uint64_t(r.budget_mb) * kMiB) << p.describe();
    }
  }
  // A fixed context that fits is kept as given.
  r.budget_mb = 1000;
  r.context = 100;
  EXPECT_EQ(plan_memory(file, file.vocab, r).context, 100);
  EXPECT_FALSE(plan_memory(file, file.vocab, r).context_chosen);
}

// Several sessions (pocket serve's slots) each hold a KV cache and scratch.
TEST(MemoryPlan, SessionsEachCountTheirKvCacheAndScratch) {
  const ModelFile file = open_model(test::stories_model());
  MemoryRequest r;
  r.threads = 2;
  const MemoryPlan one = memory_for(file, file.vocab, r, 300);
  r.sessions = 4;
  const MemoryPlan four = memory_for(file, file.vocab, r, 300);
  EXPECT_EQ(four.kv, 4 * one.kv);
  EXPECT_EQ(four.scratch, 4 * one.scratch);
  EXPECT_EQ(four.weights, one.weights);
  EXPECT_EQ(four.overhead, one.overhead);
  EXPECT_NE(four.describe().find("4 sessions x 300 tokens"), std::string::npos) << four.describe();
  r.sessions = 0;
  r.budget_mb = 100;
  r.max_context = 512;
  EXPECT_THROW(plan_memory(file, file.vocab, r), Error);
}

// Without a KV type from the caller the plan keeps f16 when the wanted
// context fits with it, else takes q8 (never q4), and says it chose.
TEST(MemoryPlan, ChoosesTheKvTypeWhenLeftOpen) {
  const ModelFile file = open_model(test::stories_model());
  MemoryRequest r;
  r.threads = 1;
  r.sessions = 8;  // makes the KV cache several MiB, so whole-MiB budgets separate the types
  r.max_context = resolve_context(0, file.config);
  const int wanted = r.max_context;
  r.kv = KVType::F16;
  const uint64_t f16 = memory_for(file, file.vocab, r, wanted).peak();
  r.kv = KVType::Q8;
  const uint64_t q8 = memory_for(file, file.vocab, r, wanted).peak();
  const int between = static_cast<int>(q8 / kMiB) + 1;
  ASSERT_LT(uint64_t(between) * kMiB, f16) << "the test needs a budget between the q8 and f16 plans";
  r.choose_kv = true;
  r.kv = KVType::Q4;  // ignored when choosing

  r.budget_mb = static_cast<int>(f16 / kMiB) + 1;
  MemoryPlan p = plan_memory(file, file.vocab, r);
  EXPECT_EQ(p.kv_type, KVType::F16);
  EXPECT_TRUE(p.kv_chosen);
  EXPECT_EQ(p.context, wanted);

  r.budget_mb = between;
  p = plan_memory(file, file.vocab, r);
  EXPECT_EQ(p.kv_type, KVType::Q8) << p.describe();
  EXPECT_EQ(p.context, wanted);
  EXPECT_LE(p.peak(), uint64_t(between) * kMiB);
  EXPECT_NE(p.describe().find("q8, chosen"), std::string::npos) << p.describe();
  // The same budget with f16 fixed by the caller: f16, less context.
  MemoryRequest fixed = r;
  fixed.choose_kv = false;
  fixed.kv = KVType::F16;
  const MemoryPlan f = plan_memory(file, file.vocab, fixed);
  EXPECT_EQ(f.kv_type, KVType::F16);
  EXPECT_FALSE(f.kv_chosen);
  EXPECT_LT(f.context, wanted);

  // Tighter still: q8 with the largest context that fits, not q4.
  r.budget_mb = between - 2;
  p = plan_memory(file, file.vocab, r);
  EXPECT_EQ(p.kv_type, KVType::Q8);
  EXPECT_LT(p.context, wanted);
  // A fixed context gets the same rule.
  r.context = 200;
  r.budget_mb = 1000;
  EXPECT_EQ(plan_memory(file, file.vocab, r).kv_type, KVType::F16);
}

TEST(MemoryPlan, TooSmallIsRefusedWithTheNumbers) {
  const ModelFile file = open_model(test::stories_model());
  MemoryRequest r;
  r.budget_mb = 2;
  r.max_context = resolve_context(0, file.config);
  try {
    plan_memory(file, file.vocab, r);
    FAIL() << "a 2 MiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    for (const char* part : {"budget of 2 MiB is too small", "weights ", "KV cache ", "(64 tokens, f16)", "of the budget of 2.0 MiB"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
  // More scratch for a larger batch: the plan counts the chunk size.
  r.budget_mb = 1000;
  r.batch = 1;
  const uint64_t one = memory_for(file, file.vocab, r, 256).scratch;
  r.batch = 128;
  EXPECT_GT(memory_for(file, file.vocab, r, 256).scratch, one);
}

TEST(MemoryPlan, EngineOpensWithThePlannedContext) {
  const ModelFile file = open_model(test::stories_model());
  MemoryRequest r;
  r.threads = 1;
  r.max_context = resolve_context(0, file.config);
  r.budget_mb = static_cast<int>(memory_for(file, file.vocab, r, 150).peak() / kMiB) + 1;
  const int planned = plan_memory(file, file.vocab, r).context;
  EngineOptions eo;
  eo.threads = 1;
  eo.mem_budget_mb = r.budget_mb;
  eo.batch = 16;
  eo.kv = "f16";  // fixed, as in r (left open, the plan might take q8 for more context)
  auto engine = Engine::open(test::stories_model(), eo);
  EXPECT_EQ(engine->context_size(), planned);
  // Chunked prefill: the same greedy tokens as whole batches.
  GenerationOptions g;
  g.temperature = 0;
  g.max_tokens = 20;
  const std::string prompt = std::string(300, 'b') + " Once upon a time";
  const std::string chunked = engine->generate(prompt, g);
  EngineOptions whole;
  whole.threads = 1;
  whole.context = planned;
  whole.kv = "f16";
  EXPECT_EQ(Engine::open(test::stories_model(), whole)->generate(prompt, g), chunked);

  EXPECT_EQ(engine->kv_cache_type(), "f16");
  // Left open under a roomy budget: f16 at the whole context; asked for, q4.
  EngineOptions open_kv;
  open_kv.threads = 1;
  open_kv.mem_budget_mb = 1000;
  auto roomy = Engine::open(test::stories_model(), open_kv);
  EXPECT_EQ(roomy->kv_cache_type(), "f16");
  EXPECT_EQ(roomy->context_size(), r.max_context);
  open_kv.kv = "q4";
  EXPECT_EQ(Engine::open(test::stories_model(), open_kv)->kv_cache_type(), "q4");

  eo.mem_budget_mb = 1;
  try {
    Engine::open(test::stories_model(), eo);
    FAIL() << "a 1 MiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pocket
