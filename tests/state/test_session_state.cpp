// Saved sessions (issue 14): a restored conversation continues exactly as if
// it had never stopped; another model, another KV type, a context too small,
// a truncated, altered or hostile file each give one clear error and leave
// the cache as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/test_util.h"
#include "formats/format_test_util.h"
#include "generate/chat_session.h"
#include "generate/session.h"
#include "model/synthetic.h"
#include "runtime/loader.h"
#include "state/session_state.h"
#include "util/error.h"
#include "util/hash64.h"
#include "util/thread_pool.h"

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

using test::error_of;
using test::read_file;
using test::write_file;

// Rewrites the trailing checksum so that a deliberate change reaches the checks behind it.
void reseal(std::vector<uint8_t>& b) {
  Hash64 h;
  h.update(b.data(), b.size() - 8);
  const uint64_t d = h.digest();
  std::memcpy(b.data() + b.size() - 8, &d, 8);
}

TEST(SessionState, RestoredChatContinuesExactlyOnStories) {
  const LoadedModel& m = stories();
  test::TempDir dir;
  const std::string path = dir.file("chat.state");
  Session a(m.model, m.tokenizer, 512, 2);
  ChatSession chat_a(a, ChatTemplate(ChatFormat::Raw));
  chat_a.send("Once upon a time", greedy(24));
  a.save_state(path, chat_a.tokens());
  auto second = chat_a.send(" The next day", greedy(24));
  auto third = chat_a.send(" Then", greedy(24));

  for (int ctx : {512, 1024}) {  // a larger context holds it too
    Session b(m.model, m.tokenizer, ctx, 1);
    ChatSession chat_b(b, ChatTemplate(ChatFormat::Raw));
    chat_b.resume(b.load_state(path));
    auto second_b = chat_b.send(" The next day", greedy(24));
    EXPECT_EQ(second_b.tokens, second.tokens) << "context " << ctx;
    EXPECT_EQ(second_b.reused_tokens, second.reused_tokens);  // nothing recomputed
    auto third_b = chat_b.send(" Then", greedy(24));
    EXPECT_EQ(third_b.tokens, third.tokens);
    EXPECT_EQ(chat_b.tokens(), chat_a.tokens());
  }

  Session small(m.model, m.tokenizer, 16, 1);
  const std::string err = error_of([&] { small.load_state(path); });
  EXPECT_NE(err.find("context is 16"), std::string::npos) << err;
}

// A Qwen3-shaped model with sliding-window layers (window 8 on every other
// layer), run past the point where the local layers drop old rows.
struct WindowModel {
  std::shared_ptr<Model> model;
  explicit WindowModel(uint64_t seed) {
    SyntheticSpec spec;
    spec.config = preset_config("tiny-qwen3");
    spec.config.sliding_window = 8;
    spec.config.swa_pattern = 2;
    spec.seed = seed;
    model = std::make_shared<Model>(std::make_shared<ModelFile>(make_synthetic_model(spec)));
  }
};

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

// For each KV type: the file holds the cache as stored (a q8 state is q8,
// about half the size) and restores bit for bit.
void check_window_restore(KVType kv) {
  SCOPED_TRACE(kv_type_name(kv));
  WindowModel wm(1);
  const Model& model = *wm.model;
  const ModelConfig& cfg = model.config();
  ThreadPool pool(2);
  Context a(cfg, 512, kv);
  test::Rng rng(7);
  std::vector<int32_t> prompt(400);
  for (auto& t : prompt) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size));
  std::vector<float> logits(cfg.vocab_size);
  model.forward(prompt, a, pool, logits.data());
  ASSERT_GT(a.cache.first_stored(0), 0) << "the local layers should have dropped old rows";
  EXPECT_EQ(a.cache.first_stored(1), 0);

  test::TempDir dir;
  const std::string path = dir.file("window.state");
  save_session_state(path, model, a.cache, {prompt, {}});
  const size_t file_size = read_file(path).size();

  Context b(cfg, 512, kv);
  SessionState s = load_session_state(path, model, b.cache);
  EXPECT_EQ(s.cached, prompt);
  EXPECT_EQ(b.cache.size(), 400);
  EXPECT_EQ(b.cache.first_stored(0), a.cache.first_stored(0));

  // Greedy continuation, 40 steps: identical logits (bit for bit), and
  // both caches shift their local layers again on the way.
  std::vector<float> lb(cfg.vocab_size);
  int32_t ta = argmax(logits), tb = ta;
  for (int i = 0; i < 40; ++i) {
    model.forward(std::span<const int32_t>(&ta, 1), a, pool, logits.data());
    model.forward(std::span<const int32_t>(&tb, 1), b, pool, lb.data());
    ASSERT_EQ(std::memcmp(logits.data(), lb.data(), logits.size() * sizeof(float)), 0) << "step " << i;
    ta = argmax(logits);
    tb = argmax(lb);
  }
  if (kv == KVType::Q8) {
    // int8 rows plus one float per row of head_dim (32 here) against fp16.
    Context f16(cfg, 512);
    model.forward(prompt, f16, pool, logits.data());
    const std::string f16_path = dir.file("window-f16.state");
    save_session_state(f16_path, model, f16.cache, {prompt, {}});
    EXPECT_LT(file_size, read_file(f16_path).size() * 6 / 10);
    // A q8 state never loads into an f16 cache (or the other way round).
    Context other(cfg, 512);
    std::string err = error_of([&] { load_session_state(path, model, other.cache); });
    EXPECT_NE(err.find("holds a q8 KV cache; this session's is f16"), std::string::npos) << err;
    EXPECT_EQ(other.cache.size(), 0);
    Context q8(cfg, 512, KVType::Q8);
    err = error_of([&] { load_session_state(f16_path, model, q8.cache); });
    EXPECT_NE(err.find("holds a f16 KV cache; this session's is q8"), std::string::npos) << err;
  }
  if (kv == KVType::Q4) {
    // Packed 4-bit rows (16 bytes + a 4-byte scale per row of 32) against
    // q8's 32 + 4: the file keeps the cache as stored.
    Context q8(cfg, 512, KVType::Q8);
    model.forward(prompt, q8, pool, logits.data());
    const std::string q8_path = dir.file("window-q8.state");
    save_session_state(q8_path, model, q8.cache, {prompt, {}});
    EXPECT_LT(file_size, read_file(q8_path).size() * 7 / 10);
    // A q4 state never loads into a q8 cache (or the other way round).
    Context other(cfg, 512, KVType::Q8);
    std::string err = error_of([&] { load_session_state(path, model, other.cache); });
    EXPECT_NE(err.find("holds a q4 KV cache; this session's is q8"), std::string::npos) << err;
    EXPECT_EQ(other.cache.size(), 0);
    Context q4(cfg, 512, KVType::Q4);
    err = error_of([&] { load_session_state(q8_path, model, q4.cache); });
    EXPECT_NE(err.find("holds a q8 KV cache; this session's is q4"), std::string::npos) << err;
  }
}

TEST(SessionState, SlidingWindowCacheRestoresBitExact) { check_window_restore(KVType::F16); }
TEST(SessionState, SlidingWindowQ8CacheRestoresBitExact) { check_window_restore(KVType::Q8); }
TEST(SessionState, SlidingWindowQ4CacheRestoresBitExact) { check_window_restore(KVType::Q4); }


TEST(SessionState, BadFilesGiveOneClearErrorAndLeaveTheCache) {
  WindowModel wm(1), other(2);
  const Model& model = *wm.model;
  const ModelConfig& cfg = model.config();
  ThreadPool pool(1);
  Context a(cfg, 64);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> logits(cfg.vocab_size);
  model.forward(prompt, a, pool, logits.data());
  test::TempDir dir;
  const std::string good = dir.file("good.state"), bad = dir.file("bad.state");
  save_session_state(good, model, a.cache, {prompt, {1, 2}});
  const std::vector<uint8_t> bytes = read_file(good);

  Context b(cfg, 64);
  const std::vector<int32_t> three = {4, 5, 6};
  model.forward(three, b, pool, logits.data());
  auto expect_error = [&](const std::vector<uint8_t>& file, const std::string& mention) {
    write_file(bad, file);
    const std::string err = error_of([&] { load_session_state(bad, model, b.cache); });
    EXPECT_NE(err.find(mention), std::string::npos) << "error: '" << err << "', expected it to mention " << mention;
    EXPECT_EQ(b.cache.size(), 3) << "a failed load changed the cache (" << mention << ")";
  };

  // Truncated anywhere: header, tokens, rows, checksum.
  for (size_t n : {size_t{0}, size_t{5}, size_t{8}, size_t{20}, size_t{60}, bytes.size() / 2, bytes.size() - 1})
    expect_error(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)),
                 n < 8 ? "not a Pocket session state" : "truncated");
  auto longer = bytes;
  longer.push_back(0);
  expect_error(longer, "unexpected bytes");
  auto flipped = bytes;
  flipped[bytes.size() - 100] ^= 1;
  expect_error(flipped, "checksum");

  // Header fields, resealed so that only the field is wrong.
  auto with_u32 = [&](size_t offset, uint32_t v) {
    auto b2 = bytes;
    std::memcpy(b2.data() + offset, &v, 4);
    reseal(b2);
    return b2;
  };
  expect_error(with_u32(8, 3), "version 3");
  // Version 1 (an earlier hasher's fingerprint and checksum): named as such.
  expect_error(with_u32(8, 1), "version 1 was saved by an earlier Pocket");
  expect_error(with_u32(12, 2), "q8 KV cache");
  expect_error(with_u32(12, 99), "unknown KV cache type");
  const size_t size_at = 16 + 8 + 6 * 4;  // magic, version, type, fingerprint, 6 fields
  expect_error(with_u32(size_at, 0xFFFFFFF0u), "context is 64");
  expect_error(with_u32(size_at, 12), "cached tokens for a KV cache");
  expect_error(with_u32(size_at + 12, 0x7FFFFFFFu), "truncated");  // a huge conversation
  auto bad_token = bytes;
  const int32_t big = 1 << 30;
  std::memcpy(bad_token.data() + size_at + 16, &big, 4);
  reseal(bad_token);
  expect_error(bad_token, "outside the vocabulary");

  // Another model of the same shape (other weights), another shape.
  Context c(other.model->config(), 64);
  std::string err = error_of([&] { load_session_state(good, *other.model, c.cache); });
  EXPECT_NE(err.find("another model"), std::string::npos) << err;
  EXPECT_EQ(c.cache.size(), 0);
  SyntheticSpec llama;
  llama.config = preset_config("tiny-llama");
  Model llama_model(std::make_shared<ModelFile>(make_synthetic_model(llama)));
  Context d(llama_model.config(), 64);
  err = error_of([&] { load_session_state(good, llama_model, d.cache); });
  EXPECT_NE(err.find("another model"), std::string::npos) << err;

  // And the good file still loads.
  SessionState s = load_session_state(good, model, b.cache);
  EXPECT_EQ(s.cached, prompt);
  EXPECT_EQ(s.conversation, (std::vector<int32_t>{1, 2}));
}

TEST(SessionState, HashDoesNotDependOnHowBytesAreSplit) {
  std::vector<uint8_t> data(100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 37 + 1);
  Hash64 whole;
  whole.update(data.data(), data.size());
  for (size_t cut1 : {0, 1, 3, 8, 13}) {
    for (size_t cut2 : {20, 57, 99}) {
      Hash64 parts;
      parts.update(data.data(), cut1);
      parts.update(data.data() + cut1, cut2 - cut1);
      parts.update(data.data() + cut2, data.size() - cut2);
      EXPECT_EQ(parts.digest(), whole.digest()) << cut1 << " " << cut2;
    }
  }
  Hash64 shorter;
  shorter.update(data.data(), data.size() - 1);
  EXPECT_NE(shorter.digest(), whole.digest());
}

}  // namespace
}  // namespace pocket

// The same through the public C++ and C APIs.
#include "pocket/pocket.h"
#include "pocket/pocket_c.h"

namespace pocket {
namespace {

TEST(SessionState, EngineAndCApiSaveAndLoad) {
  test::TempDir dir;
  const std::string path = dir.file("engine.state");
  GenerationOptions opt;
  opt.max_tokens = 16;
  opt.temperature = 0;
  auto a = Engine::open(test::stories_model());
  a->chat("Once upon a time", opt);
  a->save_state(path);
  const std::string second = a->chat("The cat", opt);

  auto model = a->model();
  auto b = Engine::create(model);
  b->chat("Something else entirely", opt);  // replaced by the load
  b->load_state(path);
  GenerationStats stats;
  EXPECT_EQ(b->chat("The cat", opt, {}, &stats), second);
  EXPECT_GT(stats.reused_tokens, 0);

  pocket_model* cm = nullptr;
  ASSERT_EQ(pocket_model_open(test::stories_model().c_str(), nullptr, &cm), POCKET_OK) << pocket_last_error();
  pocket_session* cs = nullptr;
  ASSERT_EQ(pocket_session_open(cm, nullptr, &cs), POCKET_OK) << pocket_last_error();
  EXPECT_EQ(pocket_session_load_state(cs, path.c_str()), POCKET_OK) << pocket_last_error();
  EXPECT_EQ(pocket_session_save_state(cs, dir.file("c.state").c_str()), POCKET_OK) << pocket_last_error();
  EXPECT_EQ(read_file(dir.file("c.state")), read_file(path));
  EXPECT_EQ(pocket_session_load_state(cs, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_session_load_state(cs, dir.file("missing.state").c_str()), POCKET_ERR_FAILED);
  EXPECT_NE(std::string(pocket_last_error()).find("missing.state"), std::string::npos) << pocket_last_error();
  pocket_session_close(cs);

  // kv_cache = "q8": its f16 state is refused by name; a bad type fails the open.
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.kv_cache = "q8";
  ASSERT_EQ(pocket_session_open(cm, &so, &cs), POCKET_OK) << pocket_last_error();
  const char* kv = nullptr;
  ASSERT_EQ(pocket_session_get_kv_cache(cs, &kv), POCKET_OK);
  EXPECT_STREQ(kv, "q8");
  EXPECT_EQ(pocket_session_get_kv_cache(cs, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_session_load_state(cs, path.c_str()), POCKET_ERR_FAILED);
  EXPECT_NE(std::string(pocket_last_error()).find("this session's is q8"), std::string::npos) << pocket_last_error();
  EXPECT_EQ(pocket_session_save_state(cs, dir.file("q8.state").c_str()), POCKET_OK) << pocket_last_error();
  pocket_session_close(cs);
  so.kv_cache = "q3";
  EXPECT_EQ(pocket_session_open(cm, &so, &cs), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pocket_last_error()).find("unknown KV cache type 'q3'"), std::string::npos) << pocket_last_error();
  pocket_model_close(cm);

  // The C++ API's q8 engine continues a q8 state exactly; an f16 engine refuses it.
  EngineOptions q8;
  q8.kv = "q8";
  auto c = Engine::open(test::stories_model(), q8);
  c->chat("Once upon a time", opt);
  const std::string q8_path = dir.file("engine-q8.state");
  c->save_state(q8_path);
  const std::string next = c->chat("The cat", opt);
  auto d = Engine::open(test::stories_model(), q8);
  d->load_state(q8_path);
  EXPECT_EQ(d->chat("The cat", opt), next);
  auto e = Engine::open(test::stories_model());
  const std::string err = error_of([&] { e->load_state(q8_path); });
  EXPECT_NE(err.find("holds a q8 KV cache; this session's is f16"), std::string::npos) << err;
}

}  // namespace
}  // namespace pocket
