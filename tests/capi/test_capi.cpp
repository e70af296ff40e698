// The C API (pocket/pocket_c.h) used the way an app would, checked against
// the C++ API it wraps: behaviour, every kind of error, handles, threads and
// cancellation. Run under ASan (stage asan) and ThreadSanitizer (stage tsan:
// the concurrent sessions, cancellation and close-while-running tests).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "pocket/pocket.h"
#include "pocket/pocket_c.h"

namespace {

using pocket::test::stories_model;

// A model and a session, closed at the end of the test.
struct Opened {
  pocket_model* model = nullptr;
  pocket_session* session = nullptr;
  explicit Opened(const pocket_session_options* so = nullptr) {
    EXPECT_EQ(pocket_model_open(stories_model().c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
    EXPECT_EQ(pocket_session_open(model, so, &session), POCKET_OK) << pocket_last_error();
  }
  ~Opened() {
    pocket_session_close(session);
    pocket_model_close(model);
  }
};

pocket_generate_options greedy(int n) {
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  o.max_tokens = n;
  o.temperature = 0;
  return o;
}

pocket_stats new_stats() {
  pocket_stats s;
  std::memset(&s, 0xAB, sizeof s);  // garbage the call must overwrite
  s.struct_size = sizeof s;
  return s;
}

// Collects the streamed text; checks each piece is NUL-terminated at its length.
struct Collect {
  std::string text;
  int pieces = 0;
  bool terminated = true;
  static int fn(const char* piece, size_t length, void* user) {
    auto* c = static_cast<Collect*>(user);
    if (piece[length] != '\0') c->terminated = false;
    c->text.append(piece, length);
    ++c->pieces;
    return 0;
  }
};

std::string cpp_generate(const std::string& prompt, int n) {
  auto engine = pocket::Engine::open(stories_model());
  pocket::GenerationOptions o;
  o.max_tokens = n;
  o.temperature = 0;
  return engine->generate(prompt, o);
}

// The message of the last failure, for matching.
std::string last_error() { return pocket_last_error(); }

TEST(CApi, VersionsAndNames) {
  EXPECT_EQ(pocket_abi_version(), POCKET_ABI_VERSION);
  EXPECT_EQ(std::string(pocket_version()), std::to_string(POCKET_VERSION_MAJOR) + "." +
                                               std::to_string(POCKET_VERSION_MINOR) + "." +
                                               std::to_string(POCKET_VERSION_PATCH));
  EXPECT_STREQ(pocket_status_name(POCKET_OK), "POCKET_OK");
  EXPECT_STREQ(pocket_status_name(POCKET_ERR_BUSY), "POCKET_ERR_BUSY");
  EXPECT_STREQ(pocket_status_name(12345), "unknown status");
  EXPECT_STREQ(pocket_stop_reason_name(POCKET_STOP_CANCELLED), "cancelled");
  EXPECT_STREQ(pocket_stop_reason_name(-1), "none");
}

TEST(CApi, GeneratesWhatTheCppApiGeneratesAndStreamsIt) {
  Opened o;
  Collect c;
  auto opt = greedy(12);
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, Collect::fn, &c, &stats), POCKET_OK)
      << pocket_last_error();
  EXPECT_EQ(c.text, cpp_generate("Once upon a time", 12));
  EXPECT_FALSE(c.text.empty());
  EXPECT_TRUE(c.terminated);
  EXPECT_EQ(stats.struct_size, sizeof(pocket_stats));
  EXPECT_EQ(stats.generated_tokens, 12);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_MAX_TOKENS);
  EXPECT_GT(stats.prompt_tokens, 1);
  EXPECT_EQ(stats.reused_tokens, 0);
  EXPECT_EQ(stats.context_used, stats.prompt_tokens + 11);  // the last sampled token is not run
  EXPECT_GE(stats.prefill_seconds, 0);
  EXPECT_GE(stats.decode_seconds, 0);

  pocket_model_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(pocket_model_get_info(o.model, &info), POCKET_OK);
  EXPECT_STREQ(info.architecture, "llama");
  EXPECT_EQ(info.vocab_size, 512);
  EXPECT_GT(info.n_layers, 0);
  int32_t ctx = 0, threads = 0;
  ASSERT_EQ(pocket_session_get_context_size(o.session, &ctx), POCKET_OK);
  EXPECT_EQ(ctx, info.context_length);
  ASSERT_EQ(pocket_session_get_threads(o.session, &threads), POCKET_OK);
  EXPECT_GE(threads, 1);
}

TEST(CApi, NullHandlesAndPointersAreErrorsNamingTheProblem) {
  auto opt = greedy(4);
  int32_t v = 0;
  size_t n = 0;
  EXPECT_EQ(pocket_session_generate(nullptr, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("pocket_session_generate: the session handle is NULL"), std::string::npos)
      << last_error();
  EXPECT_EQ(pocket_session_chat(nullptr, "x", nullptr, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_reset(nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_cancel(nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_close(nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_set_threads(nullptr, 1), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_get_threads(nullptr, &v), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_get_context_size(nullptr, &v), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_model_close(nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("pocket_model_close: the model handle is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(pocket_tokenize(nullptr, "x", 1, 0, nullptr, 0, &n), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_detokenize(nullptr, nullptr, 0, nullptr, 0, &n), POCKET_ERR_INVALID_HANDLE);
  pocket_model_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(pocket_model_get_info(nullptr, &info), POCKET_ERR_INVALID_HANDLE);
  pocket_session* s = reinterpret_cast<pocket_session*>(0x1);
  EXPECT_EQ(pocket_session_open(nullptr, nullptr, &s), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(s, nullptr);  // the output is cleared on failure
  // A handle value that was never handed out is an error, not a crash.
  EXPECT_EQ(pocket_session_reset(reinterpret_cast<pocket_session*>(uintptr_t{0xdeadbeef})),
            POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("never opened"), std::string::npos) << last_error();

  Opened o;
  EXPECT_EQ(pocket_model_open(stories_model().c_str(), nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  pocket_model* m = nullptr;
  EXPECT_EQ(pocket_model_open(nullptr, nullptr, &m), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("path is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(pocket_session_open(o.model, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_session_generate(o.session, nullptr, &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the text is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(pocket_session_get_threads(o.session, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_tokenize(o.model, "x", 1, 0, nullptr, 0, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_model_get_info(o.model, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  // The wrong kind of handle is named as such.
  EXPECT_EQ(pocket_session_reset(reinterpret_cast<pocket_session*>(o.model)), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("is a model handle, not a session handle"), std::string::npos) << last_error();
  EXPECT_EQ(pocket_model_close(reinterpret_cast<pocket_model*>(o.session)), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("is a session handle, not a model handle"), std::string::npos) << last_error();
}

TEST(CApi, DoubleCloseIsAnErrorNotACrash) {
  pocket_model* model = nullptr;
  pocket_session* session = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
  ASSERT_EQ(pocket_session_open(model, nullptr, &session), POCKET_OK) << pocket_last_error();
  EXPECT_EQ(pocket_session_close(session), POCKET_OK);
  EXPECT_EQ(pocket_session_close(session), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("pocket_session_close: the session handle is not an open session (closed already"),
            std::string::npos)
      << last_error();
  auto opt = greedy(2);
  EXPECT_EQ(pocket_session_generate(session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_model_close(model), POCKET_OK);
  EXPECT_EQ(pocket_model_close(model), POCKET_ERR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("closed already"), std::string::npos) << last_error();
  size_t n = 0;
  EXPECT_EQ(pocket_tokenize(model, "x", 1, 0, nullptr, 0, &n), POCKET_ERR_INVALID_HANDLE);
}

TEST(CApi, SessionsOutliveTheirModelHandle) {
  pocket_model* model = nullptr;
  pocket_session* session = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
  ASSERT_EQ(pocket_session_open(model, nullptr, &session), POCKET_OK) << pocket_last_error();
  ASSERT_EQ(pocket_model_close(model), POCKET_OK);
  Collect c;
  auto opt = greedy(8);
  EXPECT_EQ(pocket_session_generate(session, "Once upon a time", &opt, Collect::fn, &c, nullptr), POCKET_OK)
      << pocket_last_error();
  EXPECT_EQ(c.text, cpp_generate("Once upon a time", 8));
  EXPECT_EQ(pocket_session_close(session), POCKET_OK);
}

TEST(CApi, BadModelFilesAreModelErrorsNamingTheFile) {
  pocket_model* m = reinterpret_cast<pocket_model*>(0x1);
  EXPECT_EQ(pocket_model_open("/nonexistent/model.gguf", nullptr, &m), POCKET_ERR_MODEL);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(last_error().find("/nonexistent/model.gguf"), std::string::npos) << last_error();
  pocket::test::TempDir dir;
  std::ofstream(dir.file("junk.gguf")) << "this is not a model";
  EXPECT_EQ(pocket_model_open(dir.file("junk.gguf").c_str(), nullptr, &m), POCKET_ERR_MODEL);
  EXPECT_NE(last_error().find("junk.gguf"), std::string::npos) << last_error();
}

TEST(CApi, BadOptionsAreInvalidArguments) {
  Opened o;
  auto opt = greedy(4);
  opt.top_p = 2.0f;
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("top-p"), std::string::npos) << last_error();
  opt = greedy(-1);
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("max tokens -1"), std::string::npos) << last_error();
  opt = greedy(4);
  opt.n_stop = 2;  // and stop NULL
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("stop is NULL but n_stop is 2"), std::string::npos) << last_error();
  const char* stops[] = {"a", nullptr};
  opt.stop = stops;
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("stop[1] is NULL"), std::string::npos) << last_error();

  pocket_session_options so;
  pocket_session_options_init(&so);
  so.context = 1 << 20;
  pocket_session* s = nullptr;
  EXPECT_EQ(pocket_session_open(o.model, &so, &s), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("context size 1048576"), std::string::npos) << last_error();
  so.context = 0;
  so.threads = -2;
  EXPECT_EQ(pocket_session_open(o.model, &so, &s), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("thread count -2"), std::string::npos) << last_error();
  EXPECT_EQ(pocket_session_set_threads(o.session, 0), POCKET_ERR_INVALID_ARGUMENT);

  pocket_model_options mo;
  pocket_model_options_init(&mo);
  mo.log_level = 7;
  pocket_model* m = nullptr;
  EXPECT_EQ(pocket_model_open(stories_model().c_str(), &mo, &m), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("log_level 7"), std::string::npos) << last_error();
}

// Options structs are read by their struct_size: too small is refused, a
// newer (larger) struct is accepted when the fields this library does not
// know are zero and refused when they are set.
TEST(CApi, StructSizesFollowTheExtensionRules) {
  Opened o;
  auto opt = greedy(3);
  opt.struct_size = 0;
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("pocket_generate_options.struct_size is 0"), std::string::npos) << last_error();
  struct Newer {
    pocket_generate_options known;
    uint64_t future_field;
  } newer;
  std::memset(&newer, 0, sizeof newer);
  newer.known = greedy(3);
  newer.known.struct_size = sizeof newer;
  Collect c;
  EXPECT_EQ(pocket_session_generate(o.session, "Once upon a time", &newer.known, Collect::fn, &c, nullptr), POCKET_OK)
      << pocket_last_error();
  EXPECT_EQ(c.text, cpp_generate("Once upon a time", 3));
  newer.future_field = 1;
  EXPECT_EQ(pocket_session_generate(o.session, "x", &newer.known, nullptr, nullptr, nullptr), POCKET_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("does not know"), std::string::npos) << last_error();

  auto stats = new_stats();
  stats.struct_size = 8;
  EXPECT_EQ(pocket_session_generate(o.session, "x", nullptr, nullptr, nullptr, &stats), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("pocket_stats.struct_size is 8"), std::string::npos) << last_error();
  // A larger result struct: the library writes what it knows, leaves the rest.
  struct NewerStats {
    pocket_stats known;
    uint32_t future_field;
  } ns;
  std::memset(&ns, 0, sizeof ns);
  ns.known.struct_size = sizeof ns;
  ns.future_field = 77;
  opt = greedy(2);
  EXPECT_EQ(pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, &ns.known), POCKET_OK);
  EXPECT_EQ(ns.known.struct_size, sizeof ns);
  EXPECT_EQ(ns.known.generated_tokens, 2);
  EXPECT_EQ(ns.future_field, 77u);
}

// The memory budget appended to pocket_session_options: the older struct
// (without it) still opens a session with no budget; a budget too small is
// refused with the numbers; one that fits chooses the context.
TEST(CApi, SessionOptionsTakeAMemoryBudget) {
  Opened o;
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.struct_size = offsetof(pocket_session_options, mem_budget_mb);  // an app built before the budget
  so.mem_budget_mb = 1;  // beyond its struct_size: not read
  pocket_session* s = nullptr;
  ASSERT_EQ(pocket_session_open(o.model, &so, &s), POCKET_OK) << pocket_last_error();
  pocket_session_close(s);
  so.struct_size = sizeof so;
  EXPECT_EQ(pocket_session_open(o.model, &so, &s), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("budget of 1 MiB is too small"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("KV cache"), std::string::npos) << last_error();
  so.mem_budget_mb = 64;
  so.batch = 16;
  ASSERT_EQ(pocket_session_open(o.model, &so, &s), POCKET_OK) << pocket_last_error();
  int32_t context = 0;
  EXPECT_EQ(pocket_session_get_context_size(s, &context), POCKET_OK);
  EXPECT_GE(context, 64);
  pocket_session_close(s);
  so.batch = 500;
  EXPECT_EQ(pocket_session_open(o.model, &so, &s), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("batch 500"), std::string::npos) << last_error();
}

// Frozen layouts (LP64): a field moved or inserted in the middle breaks
// every binding built against the old header, so it must fail here first.
TEST(CApi, StructLayoutsAreFrozen) {
  if (sizeof(void*) != 8) GTEST_SKIP() << "layouts are frozen for LP64 targets";
  EXPECT_EQ(offsetof(pocket_model_options, log_level), 4u);
  EXPECT_EQ(offsetof(pocket_model_options, tokenizer_path), 8u);
  EXPECT_EQ(offsetof(pocket_model_options, on_progress), 16u);
  EXPECT_EQ(offsetof(pocket_model_options, progress_user_data), 24u);
  EXPECT_EQ(offsetof(pocket_model_options, on_log), 32u);
  EXPECT_EQ(offsetof(pocket_model_options, log_user_data), 40u);
  EXPECT_EQ(sizeof(pocket_model_options), 48u);
  EXPECT_EQ(offsetof(pocket_model_info, vocab_size), 4u);
  EXPECT_EQ(offsetof(pocket_model_info, context_length), 8u);
  EXPECT_EQ(offsetof(pocket_model_info, n_layers), 12u);
  EXPECT_EQ(offsetof(pocket_model_info, architecture), 16u);
  EXPECT_EQ(sizeof(pocket_model_info), 24u);
  EXPECT_EQ(offsetof(pocket_session_options, threads), 4u);
  EXPECT_EQ(offsetof(pocket_session_options, context), 8u);
  EXPECT_EQ(offsetof(pocket_session_options, enable_thinking), 12u);
  EXPECT_EQ(offsetof(pocket_session_options, system_prompt), 16u);
  EXPECT_EQ(offsetof(pocket_session_options, mem_budget_mb), 24u);  // appended: memory budget
  EXPECT_EQ(offsetof(pocket_session_options, batch), 28u);
  EXPECT_EQ(offsetof(pocket_session_options, kv_cache), 32u);  // appended: KV cache type
  EXPECT_EQ(sizeof(pocket_session_options), 40u);
  EXPECT_EQ(offsetof(pocket_generate_options, max_tokens), 4u);
  EXPECT_EQ(offsetof(pocket_generate_options, temperature), 8u);
  EXPECT_EQ(offsetof(pocket_generate_options, top_k), 12u);
  EXPECT_EQ(offsetof(pocket_generate_options, top_p), 16u);
  EXPECT_EQ(offsetof(pocket_generate_options, min_p), 20u);
  EXPECT_EQ(offsetof(pocket_generate_options, repeat_penalty), 24u);
  EXPECT_EQ(offsetof(pocket_generate_options, repeat_last_n), 28u);
  EXPECT_EQ(offsetof(pocket_generate_options, seed), 32u);
  EXPECT_EQ(offsetof(pocket_generate_options, ignore_eos), 40u);
  EXPECT_EQ(offsetof(pocket_generate_options, n_stop), 44u);
  EXPECT_EQ(offsetof(pocket_generate_options, stop), 48u);
  EXPECT_EQ(offsetof(pocket_generate_options, on_prefill_progress), 56u);
  EXPECT_EQ(offsetof(pocket_generate_options, prefill_user_data), 64u);
  EXPECT_EQ(offsetof(pocket_generate_options, constraint_kind), 72u);  // appended: structured output
  EXPECT_EQ(offsetof(pocket_generate_options, constraint_text), 80u);
  EXPECT_EQ(offsetof(pocket_generate_options, choices), 88u);
  EXPECT_EQ(offsetof(pocket_generate_options, n_choices), 96u);
  EXPECT_EQ(offsetof(pocket_generate_options, json_whitespace), 100u);
  EXPECT_EQ(offsetof(pocket_generate_options, json_open), 104u);  // appended
  EXPECT_EQ(sizeof(pocket_generate_options), 112u);
  EXPECT_EQ(offsetof(pocket_stats, prompt_tokens), 4u);
  EXPECT_EQ(offsetof(pocket_stats, reused_tokens), 8u);
  EXPECT_EQ(offsetof(pocket_stats, generated_tokens), 12u);
  EXPECT_EQ(offsetof(pocket_stats, stop_reason), 16u);
  EXPECT_EQ(offsetof(pocket_stats, context_used), 20u);
  EXPECT_EQ(offsetof(pocket_stats, prefill_seconds), 24u);
  EXPECT_EQ(offsetof(pocket_stats, decode_seconds), 32u);
  EXPECT_EQ(offsetof(pocket_stats, constraint_complete), 40u);  // appended: structured output
  EXPECT_EQ(offsetof(pocket_stats, reserved), 44u);
  EXPECT_EQ(sizeof(pocket_stats), 48u);
  EXPECT_EQ(sizeof(pocket_status), 4u);
}

TEST(CApi, PromptLongerThanTheContextIsContextFull) {
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.context = 8;
  Opened o(&so);
  auto opt = greedy(4);
  EXPECT_EQ(pocket_session_generate(o.session, "Once upon a time there was a little girl named Lily", &opt, nullptr,
                                    nullptr, nullptr),
            POCKET_ERR_CONTEXT_FULL);
  EXPECT_NE(last_error().find("the context holds 8"), std::string::npos) << last_error();
  // A prompt that fits runs until the context is full.
  auto stats = new_stats();
  opt = greedy(100);
  EXPECT_EQ(pocket_session_generate(o.session, "Once", &opt, nullptr, nullptr, &stats), POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CONTEXT_FULL);
  EXPECT_EQ(stats.context_used, 8);
}

TEST(CApi, TokenizeAndDetokenizeWithBufferSizing) {
  Opened o;
  const std::string text = "The cat sat on the mat.";
  size_t n = 0;
  EXPECT_EQ(pocket_tokenize(o.model, text.data(), text.size(), 0, nullptr, 0, &n), POCKET_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, pocket::Engine::open(stories_model())->tokenize(text).size());
  std::vector<int32_t> ids(n);
  ASSERT_EQ(pocket_tokenize(o.model, text.data(), text.size(), 0, ids.data(), ids.size(), &n), POCKET_OK);
  EXPECT_EQ(ids, pocket::Engine::open(stories_model())->tokenize(text));
  size_t len = 0;
  EXPECT_EQ(pocket_detokenize(o.model, ids.data(), ids.size(), nullptr, 0, &len), POCKET_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, text.size());
  std::vector<char> buf(len);  // one short: no room for the NUL
  EXPECT_EQ(pocket_detokenize(o.model, ids.data(), ids.size(), buf.data(), buf.size(), &len),
            POCKET_ERR_BUFFER_TOO_SMALL);
  buf.resize(len + 1);
  ASSERT_EQ(pocket_detokenize(o.model, ids.data(), ids.size(), buf.data(), buf.size(), &len), POCKET_OK);
  EXPECT_EQ(std::string(buf.data()), text);
  const int32_t bad[] = {1, 99999};
  EXPECT_EQ(pocket_detokenize(o.model, bad, 2, buf.data(), buf.size(), &len), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("99999"), std::string::npos) << last_error();
  // The text need not be NUL-terminated: only text_length bytes are read.
  ASSERT_EQ(pocket_tokenize(o.model, "The catXXXX", 7, 0, ids.data(), ids.size(), &n), POCKET_OK);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(n)),
            pocket::Engine::open(stories_model())->tokenize("The cat"));
}

TEST(CApi, ChatReusesEarlierTurnsAndResetForgetsThem) {
  Opened o;
  auto opt = greedy(10);
  auto s1 = new_stats(), s2 = new_stats(), s3 = new_stats();
  Collect c1, c3;
  ASSERT_EQ(pocket_session_chat(o.session, "Once upon a time", &opt, Collect::fn, &c1, &s1), POCKET_OK);
  ASSERT_EQ(pocket_session_chat(o.session, " Then", &opt, nullptr, nullptr, &s2), POCKET_OK);
  EXPECT_EQ(s1.reused_tokens, 0);
  EXPECT_GT(s2.reused_tokens, s1.prompt_tokens);
  ASSERT_EQ(pocket_session_reset(o.session), POCKET_OK);
  ASSERT_EQ(pocket_session_chat(o.session, "Once upon a time", &opt, Collect::fn, &c3, &s3), POCKET_OK);
  EXPECT_EQ(s3.reused_tokens, 0);
  EXPECT_EQ(c3.text, c1.text);
  auto engine = pocket::Engine::open(stories_model());
  pocket::GenerationOptions g;
  g.max_tokens = 10;
  g.temperature = 0;
  EXPECT_EQ(c1.text, engine->chat("Once upon a time", g));
}

TEST(CApi, StopStringsEndTheTextBeforeThem) {
  Opened o;
  const std::string full = cpp_generate("Once upon a time", 40);
  ASSERT_GT(full.size(), 20u);
  const std::string stop = full.substr(12, 4);
  const std::string expected = full.substr(0, full.find(stop));
  auto opt = greedy(40);
  const char* stops[] = {"never appears in the story", stop.c_str()};
  opt.stop = stops;
  opt.n_stop = 2;
  Collect c;
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, Collect::fn, &c, &stats), POCKET_OK);
  EXPECT_EQ(c.text, expected);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_STOP_STRING);
}

TEST(CApi, CallbackReturningNonzeroStops) {
  Opened o;
  auto opt = greedy(50);
  auto stats = new_stats();
  int calls = 0;
  auto fn = [](const char*, size_t, void* user) { return ++*static_cast<int*>(user) >= 3 ? 1 : 0; };
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, fn, &calls, &stats), POCKET_OK);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CALLBACK);
}

// Different results per session (seed and prompt), so a mix-up between
// sessions would show.
pocket_generate_options sampled(int i) {
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  o.max_tokens = 32;
  o.temperature = 0.9f;
  o.seed = 1000 + static_cast<uint64_t>(i);
  return o;
}
std::string prompt_for(int i) { return i % 2 ? "Once upon a time" : "The little dog"; }

// Apps run several conversations on one model from their own threads. Run
// under ThreadSanitizer by scripts/test.sh (stage tsan).
TEST(CApi, EightSessionsOnOneModelFromEightThreadsMatchOneAtATime) {
  constexpr int kSessions = 8;
  pocket_model* model = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.threads = 1;
  std::vector<std::string> expected(kSessions);
  {
    pocket_session* s = nullptr;
    ASSERT_EQ(pocket_session_open(model, &so, &s), POCKET_OK);
    for (int i = 0; i < kSessions; ++i) {
      Collect c;
      auto opt = sampled(i);
      ASSERT_EQ(pocket_session_reset(s), POCKET_OK);
      ASSERT_EQ(pocket_session_generate(s, prompt_for(i).c_str(), &opt, Collect::fn, &c, nullptr), POCKET_OK);
      expected[i] = c.text;
    }
    pocket_session_close(s);
  }
  EXPECT_NE(expected[0], expected[2]);  // the seeds matter: a mix-up would show
  std::vector<pocket_session*> sessions(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    so.threads = 1 + i % 2;  // some with a worker thread of their own: results are the same for any count
    ASSERT_EQ(pocket_session_open(model, &so, &sessions[i]), POCKET_OK);
  }
  std::vector<std::string> got(kSessions);
  std::vector<int> status(kSessions, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 2; ++round) {  // the second round reuses nothing: a new prompt each time
        Collect c;
        auto opt = sampled(i);
        pocket_session_reset(sessions[i]);
        status[i] = pocket_session_generate(sessions[i], prompt_for(i).c_str(), &opt, Collect::fn, &c, nullptr);
        got[i] = c.text;
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(status[i], POCKET_OK) << "session " << i;
    EXPECT_EQ(got[i], expected[i]) << "session " << i;
  }
  for (auto s : sessions) EXPECT_EQ(pocket_session_close(s), POCKET_OK);
  EXPECT_EQ(pocket_model_close(model), POCKET_OK);
}

// How many times the process maps `path` (/proc/self/maps).
int mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line))
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) ++n;
  return n;
}

TEST(CApi, MoreSessionsDoNotMapTheWeightsAgain) {
  const std::string path = std::filesystem::canonical(stories_model()).string();
  pocket_model* model = nullptr;
  ASSERT_EQ(pocket_model_open(path.c_str(), nullptr, &model), POCKET_OK) << pocket_last_error();
  std::vector<pocket_session*> sessions(4);
  ASSERT_EQ(pocket_session_open(model, nullptr, &sessions[0]), POCKET_OK);
  const int once = mappings_of(path);
  EXPECT_GE(once, 1);
  for (size_t i = 1; i < sessions.size(); ++i) ASSERT_EQ(pocket_session_open(model, nullptr, &sessions[i]), POCKET_OK);
  EXPECT_EQ(mappings_of(path), once);
  for (auto s : sessions) pocket_session_close(s);
  pocket_model_close(model);
  EXPECT_EQ(mappings_of(path), 0) << "the last close unmaps the weights";
}

// A second thread, told when to act and telling when it has.
class Helper {
 public:
  template <class Fn>
  explicit Helper(Fn fn)
      : thread_([this, fn] {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return go_; });
          lock.unlock();
          fn();
          lock.lock();
          done_ = true;
          cv_.notify_all();
        }) {}
  ~Helper() {
    if (thread_.joinable()) {
      signal_and_wait();
      thread_.join();
    }
  }
  // Lets the helper act and waits until it has.
  void signal_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    go_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool go_ = false, done_ = false;
  std::thread thread_;
};

TEST(CApi, CancelFromAnotherThreadStopsWithinOneDecodeStep) {
  Opened o;
  struct State {
    Helper* helper;
    int pieces = 0;
  };
  int cancel_status = -1;
  Helper helper([&] { cancel_status = pocket_session_cancel(o.session); });
  State st{&helper, 0};
  auto fn = [](const char*, size_t, void* user) {
    auto* s = static_cast<State*>(user);
    if (++s->pieces == 5) s->helper->signal_and_wait();  // the other thread cancels now
    return 0;
  };
  auto opt = greedy(200);
  opt.ignore_eos = 1;
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, fn, &st, &stats), POCKET_OK);
  EXPECT_EQ(cancel_status, POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CANCELLED);
  EXPECT_EQ(st.pieces, 5);
  EXPECT_EQ(stats.generated_tokens, 5);
  // A cancel when nothing runs does not reach the next call.
  EXPECT_EQ(pocket_session_cancel(o.session), POCKET_OK);
  opt = greedy(6);
  EXPECT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, nullptr, nullptr, &stats), POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_MAX_TOKENS);
  EXPECT_EQ(stats.generated_tokens, 6);
}

TEST(CApi, CancelDuringPrefillKeepsTheBatchesDoneAndTheSessionUsable) {
  Opened o;
  // A prompt of several prefill batches (128 tokens each).
  std::string prompt;
  while (true) {
    prompt += "Once upon a time, there was a little girl named Lily. She liked to play outside. ";
    size_t n = 0;
    pocket_tokenize(o.model, prompt.data(), prompt.size(), 0, nullptr, 0, &n);
    if (n > 300) break;
  }
  struct State {
    Helper* helper;
    std::vector<float> seen;
    int pieces = 0;
  };
  int cancel_status = -1;
  Helper helper([&] { cancel_status = pocket_session_cancel(o.session); });
  State st{&helper, {}, 0};
  auto opt = greedy(20);
  opt.prefill_user_data = &st;
  opt.on_prefill_progress = [](float p, void* user) {
    auto* s = static_cast<State*>(user);
    s->seen.push_back(p);
    if (s->seen.size() == 1) s->helper->signal_and_wait();  // cancelled after the first batch
    return 0;
  };
  auto count_pieces = [](const char*, size_t, void* user) {
    ++static_cast<State*>(user)->pieces;
    return 0;
  };
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, prompt.c_str(), &opt, count_pieces, &st, &stats), POCKET_OK);
  EXPECT_EQ(cancel_status, POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CANCELLED);
  EXPECT_EQ(stats.generated_tokens, 0);
  EXPECT_EQ(st.pieces, 0);
  ASSERT_EQ(st.seen.size(), 1u) << "no batch ran after the cancel";
  EXPECT_GT(st.seen[0], 0.0f);
  EXPECT_LT(st.seen[0], 1.0f);
  EXPECT_GT(stats.context_used, 0);
  EXPECT_LT(stats.context_used, stats.prompt_tokens);

  // The next call reuses the batch done and gives what a fresh session gives.
  auto plain = greedy(20);
  Collect again, fresh;
  auto s2 = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, prompt.c_str(), &plain, Collect::fn, &again, &s2), POCKET_OK);
  EXPECT_EQ(s2.reused_tokens, stats.context_used);
  EXPECT_EQ(s2.stop_reason, POCKET_STOP_MAX_TOKENS);
  Opened other;
  ASSERT_EQ(pocket_session_generate(other.session, prompt.c_str(), &plain, Collect::fn, &fresh, nullptr), POCKET_OK);
  EXPECT_EQ(again.text, fresh.text);

  // The progress callback itself can stop the prompt too.
  ASSERT_EQ(pocket_session_reset(o.session), POCKET_OK);
  opt.on_prefill_progress = [](float, void*) { return 1; };
  ASSERT_EQ(pocket_session_generate(o.session, prompt.c_str(), &opt, nullptr, nullptr, &stats), POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CANCELLED);
  EXPECT_EQ(stats.generated_tokens, 0);
}

TEST(CApi, ASecondCallOnABusySessionIsRefused) {
  Opened o;
  struct State {
    Helper* helper;
    int pieces = 0;
  };
  int generate_status = -1, reset_status = -1, threads_status = -1;
  std::string message;
  Helper helper([&] {
    auto opt = greedy(3);
    generate_status = pocket_session_generate(o.session, "x", &opt, nullptr, nullptr, nullptr);
    message = pocket_last_error();
    reset_status = pocket_session_reset(o.session);
    threads_status = pocket_session_set_threads(o.session, 1);
  });
  State st{&helper, 0};
  auto fn = [](const char*, size_t, void* user) {
    auto* s = static_cast<State*>(user);
    if (++s->pieces == 2) s->helper->signal_and_wait();
    return 0;
  };
  auto opt = greedy(4);
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, fn, &st, &stats), POCKET_OK);
  EXPECT_EQ(generate_status, POCKET_ERR_BUSY);
  EXPECT_NE(message.find("busy"), std::string::npos) << message;
  EXPECT_EQ(reset_status, POCKET_ERR_BUSY);
  EXPECT_EQ(threads_status, POCKET_ERR_BUSY);
  EXPECT_EQ(stats.generated_tokens, 4);  // the running call was not disturbed
}

TEST(CApi, ClosingASessionWhileAnotherThreadGeneratesCancelsIt) {
  pocket_model* model = nullptr;
  pocket_session* session = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), nullptr, &model), POCKET_OK);
  ASSERT_EQ(pocket_session_open(model, nullptr, &session), POCKET_OK);
  ASSERT_EQ(pocket_model_close(model), POCKET_OK);
  int close_status = -1;
  Helper helper([&] { close_status = pocket_session_close(session); });
  struct State {
    Helper* helper;
    int pieces = 0;
  } st{&helper, 0};
  auto fn = [](const char*, size_t, void* user) {
    auto* s = static_cast<State*>(user);
    if (++s->pieces == 3) s->helper->signal_and_wait();
    return 0;
  };
  auto opt = greedy(100);
  opt.ignore_eos = 1;
  auto stats = new_stats();
  ASSERT_EQ(pocket_session_generate(session, "Once upon a time", &opt, fn, &st, &stats), POCKET_OK);
  EXPECT_EQ(close_status, POCKET_OK);
  EXPECT_EQ(stats.stop_reason, POCKET_STOP_CANCELLED);
  EXPECT_EQ(stats.generated_tokens, 3);
  EXPECT_EQ(pocket_session_generate(session, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_HANDLE);
}

TEST(CApi, SetThreadsKeepsResultsIdentical) {
  Opened o;
  auto opt = sampled(3);
  Collect one, two;
  ASSERT_EQ(pocket_session_set_threads(o.session, 1), POCKET_OK);
  int32_t t = 0;
  ASSERT_EQ(pocket_session_get_threads(o.session, &t), POCKET_OK);
  EXPECT_EQ(t, 1);
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, Collect::fn, &one, nullptr), POCKET_OK);
  ASSERT_EQ(pocket_session_reset(o.session), POCKET_OK);
  ASSERT_EQ(pocket_session_set_threads(o.session, 3), POCKET_OK);
  ASSERT_EQ(pocket_session_get_threads(o.session, &t), POCKET_OK);
  EXPECT_EQ(t, 3);
  ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &opt, Collect::fn, &two, nullptr), POCKET_OK);
  EXPECT_EQ(one.text, two.text);
}

struct LogRecord {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lines;
  static void fn(int level, const char* message, void* user) {
    auto* r = static_cast<LogRecord*>(user);
    std::lock_guard<std::mutex> lock(r->mu);
    r->lines.emplace_back(level, message);
  }
  bool has(int level, const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [l, m] : lines)
      if (l == level && m.find(part) != std::string::npos) return true;
    return false;
  }
};

TEST(CApi, LogCallbackIsPerModelAndHearsLoadsAndFailures) {
  LogRecord rec, quiet;
  pocket_model_options mo;
  pocket_model_options_init(&mo);
  mo.on_log = LogRecord::fn;
  mo.log_user_data = &rec;
  mo.log_level = POCKET_LOG_DEBUG;
  pocket_model* model = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), &mo, &model), POCKET_OK);
  EXPECT_TRUE(rec.has(POCKET_LOG_INFO, "loaded " + stories_model())) << rec.lines.size();
  pocket_session* s = nullptr;
  ASSERT_EQ(pocket_session_open(model, nullptr, &s), POCKET_OK);
  EXPECT_TRUE(rec.has(POCKET_LOG_DEBUG, "engine created"));
  auto opt = greedy(3);
  opt.top_k = -5;
  EXPECT_EQ(pocket_session_generate(s, "x", &opt, nullptr, nullptr, nullptr), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(rec.has(POCKET_LOG_ERROR, "pocket_session_generate: top-k -5"));

  // A second model with its own callback and level: nothing crosses over.
  mo.log_user_data = &quiet;
  mo.log_level = POCKET_LOG_ERROR;
  pocket_model* other = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), &mo, &other), POCKET_OK);
  EXPECT_TRUE(quiet.lines.empty()) << "info is below the level: " << quiet.lines.front().second;
  const size_t before = rec.lines.size();
  pocket_model* bad = nullptr;
  EXPECT_EQ(pocket_model_open("/nonexistent/x.gguf", &mo, &bad), POCKET_ERR_MODEL);
  EXPECT_TRUE(quiet.has(POCKET_LOG_ERROR, "/nonexistent/x.gguf"));
  EXPECT_EQ(rec.lines.size(), before);
  pocket_session_close(s);
  pocket_model_close(model);
  pocket_model_close(other);
}

TEST(CApi, LoadProgressRisesToOneAndCanCancel) {
  struct Progress {
    std::vector<float> seen;
    int stop_at = -1;
    static int fn(float p, void* user) {
      auto* s = static_cast<Progress*>(user);
      s->seen.push_back(p);
      return static_cast<int>(s->seen.size()) == s->stop_at ? 1 : 0;
    }
  } pr;
  pocket_model_options mo;
  pocket_model_options_init(&mo);
  mo.on_progress = Progress::fn;
  mo.progress_user_data = &pr;
  pocket_model* model = nullptr;
  ASSERT_EQ(pocket_model_open(stories_model().c_str(), &mo, &model), POCKET_OK);
  ASSERT_GE(pr.seen.size(), 3u);
  EXPECT_EQ(pr.seen.front(), 0.0f);
  EXPECT_EQ(pr.seen.back(), 1.0f);
  for (size_t i = 1; i < pr.seen.size(); ++i) EXPECT_GE(pr.seen[i], pr.seen[i - 1]);
  pocket_model_close(model);

  pr.seen.clear();
  pr.stop_at = 2;
  model = reinterpret_cast<pocket_model*>(0x1);
  EXPECT_EQ(pocket_model_open(stories_model().c_str(), &mo, &model), POCKET_ERR_CANCELLED);
  EXPECT_EQ(model, nullptr);
  EXPECT_EQ(pr.seen.size(), 2u);
  EXPECT_NE(last_error().find("cancelled"), std::string::npos) << last_error();
}

TEST(CApi, TheLastErrorIsPerThread) {
  EXPECT_EQ(pocket_session_reset(nullptr), POCKET_ERR_INVALID_HANDLE);
  const std::string here = last_error();
  std::string there;
  std::thread([&] {
    there = last_error();
    pocket_model_close(nullptr);
  }).join();
  EXPECT_EQ(there, "");
  EXPECT_EQ(last_error(), here);
}

}  // namespace

// Every sampling field of pocket_generate_options reaches the sampler: the C
// call gives what the C++ API gives with the same options, and each variant
// changes the text (so a field the C layer dropped would show as the base text).
TEST(CApi, EverySamplingOptionReachesTheSampler) {
  struct Variant {
    const char* name;
    void (*set_c)(pocket_generate_options&);
    void (*set_cpp)(pocket::GenerationOptions&);
  };
  const Variant variants[] = {
      {"base", [](pocket_generate_options&) {}, [](pocket::GenerationOptions&) {}},
      {"temperature", [](pocket_generate_options& o) { o.temperature = 1.6f; },
       [](pocket::GenerationOptions& o) { o.temperature = 1.6f; }},
      {"top_k", [](pocket_generate_options& o) { o.top_k = 2; }, [](pocket::GenerationOptions& o) { o.top_k = 2; }},
      {"top_p", [](pocket_generate_options& o) { o.top_p = 0.3f; },
       [](pocket::GenerationOptions& o) { o.top_p = 0.3f; }},
      {"min_p", [](pocket_generate_options& o) { o.min_p = 0.3f; },
       [](pocket::GenerationOptions& o) { o.min_p = 0.3f; }},
      {"repeat_penalty", [](pocket_generate_options& o) { o.repeat_penalty = 2.0f; },
       [](pocket::GenerationOptions& o) { o.repeat_penalty = 2.0f; }},
      {"seed", [](pocket_generate_options& o) { o.seed = 77; }, [](pocket::GenerationOptions& o) { o.seed = 77; }},
  };
  auto engine = pocket::Engine::open(stories_model());
  Opened o;
  std::string base;
  for (const Variant& v : variants) {
    pocket_generate_options c_opt;
    pocket_generate_options_init(&c_opt);
    c_opt.max_tokens = 40;
    c_opt.temperature = 0.9f;
    c_opt.min_p = 0;
    c_opt.seed = 5;
    c_opt.ignore_eos = 1;
    v.set_c(c_opt);
    pocket::GenerationOptions cpp_opt;
    cpp_opt.max_tokens = 40;
    cpp_opt.temperature = 0.9f;
    cpp_opt.min_p = 0;
    cpp_opt.seed = 5;
    cpp_opt.ignore_eos = true;
    v.set_cpp(cpp_opt);
    Collect c;
    ASSERT_EQ(pocket_session_generate(o.session, "Once upon a time", &c_opt, Collect::fn, &c, nullptr), POCKET_OK)
        << pocket_last_error();
    const std::string expected = engine->generate("Once upon a time", cpp_opt);
    EXPECT_EQ(c.text, expected) << v.name;
    if (base.empty()) {
      base = expected;
    } else {
      EXPECT_NE(expected, base) << v.name << " does not change the text, so this test cannot see it dropped";
    }
  }
}

// The session's system prompt reaches the chat template (stories260K's is
// plain text, so the system prompt adds prompt tokens).
TEST(CApi, SessionSystemPromptReachesChat) {
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.system_prompt = "You tell short stories about cats.";
  Opened with(&so), without;
  pocket::EngineOptions eo;
  eo.system_prompt = so.system_prompt;
  auto engine = pocket::Engine::open(stories_model(), eo);
  auto opt = greedy(16);
  Collect a, b;
  auto sa = new_stats(), sb = new_stats();
  ASSERT_EQ(pocket_session_chat(with.session, "Hello", &opt, Collect::fn, &a, &sa), POCKET_OK) << last_error();
  ASSERT_EQ(pocket_session_chat(without.session, "Hello", &opt, Collect::fn, &b, &sb), POCKET_OK) << last_error();
  pocket::GenerationOptions cpp_opt;
  cpp_opt.max_tokens = 16;
  cpp_opt.temperature = 0;
  pocket::GenerationStats cs;
  EXPECT_EQ(a.text, engine->chat("Hello", cpp_opt, {}, &cs));
  EXPECT_EQ(sa.prompt_tokens, cs.prompt_tokens);
  EXPECT_GT(sa.prompt_tokens, sb.prompt_tokens);
}
