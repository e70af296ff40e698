// A shared prompt prefix (issue 14): a session started from it holds exactly
// what prefilling the prefix would have written, continues with the same
// greedy tokens, and recomputes none of it.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "generate/session.h"
#include "runtime/loader.h"
#include "generate/prefix_cache.h"
#include "util/error.h"
#include "bench/system.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"

#include <cmath>
#include <cstring>
#include <memory>

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

// Copy-on-write: sessions of the owner's shape map the prefix's image; each
// one's writes stay its own (a session that wrote past and inside the prefix
// leaves the image and the other sessions as they were), for every KV type.
TEST(PrefixCache, CopyOnWriteSessionsStayIndependent) {
  LoadedModel m = load_model(test::stories_model());
  const std::vector<int32_t> prefix = m.tokenizer->encode("Once upon a time, there was a little girl named Lily. She");
  GenerateOptions greedy;
  greedy.max_tokens = 12;
  greedy.sampling.temperature = 0;
  auto prompt = [&](const char* tail) {
    std::vector<int32_t> p = prefix;
    for (int32_t t : m.tokenizer->encode(tail)) p.push_back(t);
    return p;
  };
  const auto a = prompt(" liked to play"), b = prompt(" had a big red ball");
  // Under qemu (soft-float, minutes per model pass) f16 only: the sharing
  // does not depend on the row format, and q8/q4 run natively.
  std::vector<KVType> kinds = {KVType::F16, KVType::Q8, KVType::Q4};
  if (test::emulated()) kinds.resize(1);
  for (KVType kv : kinds) {
    SCOPED_TRACE(kv_type_name(kv));
    auto expect = [&](const std::vector<int32_t>& p) {
      Session fresh(m.model, m.tokenizer, 96, 1, 0, kv);
      return fresh.generate(p, greedy).tokens;
    };
    const auto want_a = expect(a), want_b = expect(b);
    Session owner(m.model, m.tokenizer, 96, 1, 0, kv);
    const PrefixCache shared(owner, prefix);
    if (!shared.copy_on_write()) GTEST_SKIP() << "no memory files here: the copy path is tested above";
    EXPECT_GT(shared.bytes(), 0u);

    Session s1(m.model, m.tokenizer, 96, 1, 0, kv), s2(m.model, m.tokenizer, 96, 1, 0, kv);
    ASSERT_TRUE(shared.apply(s1));
    ASSERT_TRUE(shared.apply(s2));
    EXPECT_EQ(s1.cached_tokens(), prefix);
    const GenerateResult r1 = s1.generate(a, greedy);
    EXPECT_EQ(r1.tokens, want_a);
    EXPECT_EQ(r1.reused_tokens, static_cast<int>(prefix.size()));
    // s1 now rewrites positions inside the prefix (a prompt that leaves it early).
    const std::vector<int32_t> other = m.tokenizer->encode("The dog ran to the park and");
    EXPECT_EQ(s1.generate(other, greedy).tokens, expect(other));
    const GenerateResult r2 = s2.generate(b, greedy);
    EXPECT_EQ(r2.tokens, want_b);
    EXPECT_EQ(r2.reused_tokens, static_cast<int>(prefix.size()));
    // The owner's own cache (which the image was taken from) is untouched too.
    EXPECT_EQ(owner.generate(a, greedy).tokens, want_a);
    Session s3(m.model, m.tokenizer, 96, 1, 0, kv);
    ASSERT_TRUE(shared.apply(s3));
    EXPECT_EQ(s3.generate(a, greedy).tokens, want_a);

    // Another shape (context) recomputes the same rows; too small a context is an error.
    Session wide(m.model, m.tokenizer, 128, 1, 0, kv);
    EXPECT_FALSE(shared.apply(wide));
    EXPECT_EQ(wide.cached_tokens(), prefix);
    EXPECT_EQ(wide.generate(b, greedy).tokens, want_b);
  }
}

// The point of sharing: caches that adopt one image hold its rows about
// once, measured as proportional set size; the rows read back exactly.
TEST(PrefixCache, CopyOnWriteCachesShareThePrefixPages) {
  if (test::emulated()) GTEST_SKIP() << "qemu does not emulate /proc/self/smaps_rollup";
  if (!bench::pss_memory_kb()) GTEST_SKIP() << "/proc/self/smaps_rollup (Pss_Anon, Pss_Shmem) is not readable";
  ModelConfig cfg = preset_config("tiny-qwen3");
  cfg.n_layers = 2;
  cfg.n_kv_heads = 2;
  cfg.head_dim = 128;
  cfg.sliding_window = 0;
  constexpr int kCtx = 2048, kPrefix = 1536, kOwn = 32, kCaches = 4;  // 6 MiB of prefix rows (f16)
  std::vector<float> x(static_cast<size_t>(cfg.n_kv_heads) * cfg.head_dim);
  auto fill = [&](KVCache& c, int from, int to, float salt) {
    for (int p = from; p < to; p += 128) {
      const int n = std::min(128, to - p);
      c.reserve_append(n);
      for (int q = p; q < p + n; ++q)
        for (int l = 0; l < cfg.n_layers; ++l)
          for (int kv = 0; kv < 2; ++kv) {
            for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.01f * q + 0.1f * i + salt + kv + 3 * l);
            c.write(l, kv, q, x.data());
          }
      c.set_size(p + n);
    }
  };
  auto same_rows = [&](const KVCache& a, const KVCache& b, int n) {
    for (int l = 0; l < cfg.n_layers; ++l)
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < cfg.n_kv_heads; ++h)
          if (std::memcmp(a.row(l, kv, h, 0), b.row(l, kv, h, 0), n * a.row_bytes()) != 0) return false;
    return true;
  };
  KVCache owner(cfg, kCtx);
  fill(owner, 0, kPrefix, 0);
  const double prefix_mib = double(kPrefix) * kv_bytes_per_token(cfg, KVType::F16) / (1 << 20);

  // Copies: each cache writes the prefix rows itself.
  // Anonymous + shared-memory PSS only: the file-backed part moves as other
  // test processes map and unmap the same libraries (a parallel ctest once
  // made the total fall between two reads).
  auto pss_mib_since = [](uint64_t before_kb) {
    return (static_cast<double>(*bench::pss_memory_kb()) - static_cast<double>(before_kb)) / 1024;
  };
  uint64_t before = *bench::pss_memory_kb();
  std::vector<std::unique_ptr<KVCache>> copies;
  for (int i = 0; i < kCaches; ++i) {
    copies.push_back(std::make_unique<KVCache>(cfg, kCtx));
    fill(*copies.back(), 0, kPrefix, 0);
    fill(*copies.back(), kPrefix, kPrefix + kOwn, 1.0f + i);
  }
  const double copied_mib = pss_mib_since(before);

  before = *bench::pss_memory_kb();
  const auto image = owner.image();
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->size(), kPrefix);
  std::vector<std::unique_ptr<KVCache>> shared;
  for (int i = 0; i < kCaches; ++i) {
    shared.push_back(std::make_unique<KVCache>(cfg, kCtx));
    ASSERT_TRUE(shared.back()->adopt(*image));
    EXPECT_EQ(shared.back()->size(), kPrefix);
    fill(*shared.back(), kPrefix, kPrefix + kOwn, 1.0f + i);
  }
  const double shared_mib = pss_mib_since(before);
  // Copies cost about kCaches x the prefix; shared about one prefix (the
  // image) plus each cache's own rows and the page it shares a boundary with.
  EXPECT_GT(copied_mib, 0.9 * kCaches * prefix_mib) << copied_mib;
  EXPECT_LT(shared_mib, 1.5 * prefix_mib) << shared_mib << " MiB shared vs " << copied_mib << " copied";
  for (int i = 0; i < kCaches; ++i) EXPECT_TRUE(same_rows(*shared[i], *copies[i], kPrefix + kOwn)) << i;
  EXPECT_TRUE(same_rows(owner, *copies[0], kPrefix));

  // A cache of another shape does not adopt it.
  KVCache other(cfg, kCtx / 2);
  EXPECT_FALSE(other.adopt(*image));
  KVCache q8(cfg, kCtx, KVType::Q8);
  EXPECT_FALSE(q8.adopt(*image));
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
