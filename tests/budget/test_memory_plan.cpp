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
    for (const char* part : {"budget of 2 MiB is too small", "weights ", "KV cache ", "(64 tokens)", "of the budget of 2.0 MiB"})
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
  EXPECT_EQ(Engine::open(test::stories_model(), whole)->generate(prompt, g), chunked);

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
