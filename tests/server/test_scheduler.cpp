// The server's slots and batched scheduler on stories260K (temperature 0):
// batched decoding gives what each request gets alone, the exact SSE byte
// streams (golden files), cancellation within one decode step, the bounded
// queue, prefix reuse and the deadline; response_format constraints in the
// slots (and the server's cache of compiled schemas).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "runtime/loader.h"
#include "server/api.h"
#include "server/constraints.h"
#include "server/prompt.h"
#include "server/scheduler.h"

namespace pocket::server {
namespace {

using namespace std::chrono_literals;

const LoadedModel& stories() {
  static const LoadedModel m = load_model(test::stories_model());
  return m;
}

JobParams greedy(const std::vector<int32_t>& prompt, int max_tokens, std::vector<std::string> stop = {}) {
  JobParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  p.stop = std::move(stop);
  p.sampling.temperature = 0;
  return p;
}

std::vector<int32_t> encode(const std::string& text) {
  CompletionRequest r;
  r.endpoint = Endpoint::Completion;
  r.prompt = text;
  return prompt_tokens(stories(), r, true);
}

SchedulerOptions options(int slots, int queue = 8, bool batched = true) {
  SchedulerOptions o;
  o.slots = slots;
  o.ctx_size = 256;
  o.threads = 2;
  o.queue_limit = queue;
  o.batched = batched;
  return o;
}

std::string joined(const Job::Output& o) {
  std::string s;
  for (auto& p : o.pieces) s += p;
  return s;
}

// Three requests decoded together (one batched forward per step) give the
// text each gets from Session::generate alone, to the byte.
TEST(ServerScheduler, BatchedSlotsGiveWhatEachRequestGetsAlone) {
  const LoadedModel& m = stories();
  const std::string prompts[] = {"Once upon a time", "The cat", "Lily and Ben went to the park. They"};
  Scheduler sched(m.model, m.tokenizer, options(3));
  std::vector<std::shared_ptr<Job>> jobs;
  for (auto& p : prompts) {
    jobs.push_back(std::make_shared<Job>(greedy(encode(p), 40)));
    ASSERT_TRUE(sched.submit(jobs.back()));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job::Output out = jobs[i]->wait_all();
    Session alone(m.model, m.tokenizer, 256, 1);
    GenerateOptions go;
    go.max_tokens = 40;
    go.sampling.temperature = 0;
    GenerateResult want = alone.generate(encode(prompts[i]), go);
    EXPECT_EQ(joined(out), want.text) << prompts[i];
    EXPECT_EQ(out.usage.completion_tokens, static_cast<int>(want.tokens.size()));
    EXPECT_EQ(out.finish_reason, want.stop == GenerateResult::Stop::Eos ? "stop" : "length");
  }
  SchedulerStats s = sched.stats();
  EXPECT_GT(s.decode_rows, s.decode_steps) << "the slots never shared a decode step";
}

// The stream of one request as the server writes it, with a fixed id and time.
std::string sse(Endpoint ep, const std::vector<int32_t>& prompt, int max_tokens, std::vector<std::string> stop) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(1));
  auto job = std::make_shared<Job>(greedy(prompt, max_tokens, std::move(stop)));
  EXPECT_TRUE(sched.submit(job));
  ResponseMeta meta{ep, ep == Endpoint::Chat ? "chatcmpl-test" : "cmpl-test", 1700000000, "stories260K"};
  std::string s = ep == Endpoint::Chat ? role_chunk(meta) : "";
  for (;;) {
    Job::Output o = job->take(1000ms);
    for (auto& p : o.pieces) s += text_chunk(meta, p);
    if (o.finished) {
      s += finish_chunk(meta, o.finish_reason) + usage_chunk(meta, o.usage) + done_event();
      return s;
    }
  }
}

void expect_golden(const std::string& name, const std::string& got) {
  const std::string path = test::test_data_dir() + "/server/" + name;
  if (std::getenv("POCKET_UPDATE_GOLDEN")) {
    std::filesystem::create_directories(test::test_data_dir() + "/server");
    std::ofstream(path, std::ios::binary) << got;
  }
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f) << "missing golden file " << path << " (POCKET_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << f.rdbuf();
  EXPECT_EQ(got, want.str()) << name;
}

TEST(ServerScheduler, GoldenSseStreams) {
  CompletionRequest chat;
  chat.messages = {{"system", "Tell a story."}, {"user", "Once upon a time"}};
  expect_golden("chat_stream.sse", sse(Endpoint::Chat, prompt_tokens(stories(), chat, true), 12, {}));
  expect_golden("completion_stream.sse", sse(Endpoint::Completion, encode("Once upon a time"), 16, {}));
  // A stop string inside a token: the text before it is sent, then "stop".
  expect_golden("completion_stop.sse", sse(Endpoint::Completion, encode("Once upon a time"), 64, {"Lil"}));
}

// A request cancelled mid-generation leaves at the next decode step.
TEST(ServerScheduler, CancelEndsWithinOneDecodeStep) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(2));
  auto other = std::make_shared<Job>(greedy(encode("The dog"), 200));
  auto job = std::make_shared<Job>(greedy(encode("Once upon a time"), 200));
  ASSERT_TRUE(sched.submit(other));
  ASSERT_TRUE(sched.submit(job));
  int seen = 0;
  while (seen < 3) seen += static_cast<int>(job->take(1000ms).pieces.size());
  job->cancel();
  const int at_cancel = job->generated.load();  // the step under way may still finish
  Job::Output out = job->wait_all();
  EXPECT_EQ(out.finish_reason, "cancelled");
  EXPECT_LE(out.usage.completion_tokens, at_cancel + 1) << "decode steps ran after the cancel";
  EXPECT_LT(out.usage.completion_tokens, 200);
  // The slot is free again: a new request is served while `other` runs.
  auto next = std::make_shared<Job>(greedy(encode("A bird"), 3));
  ASSERT_TRUE(sched.submit(next));
  EXPECT_EQ(next->wait_all().usage.completion_tokens, 3);
  other->cancel();
}

TEST(ServerScheduler, BoundedQueueRefusesBeyondIt) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(1, 1));
  auto a = std::make_shared<Job>(greedy(encode("Once"), 400));
  auto b = std::make_shared<Job>(greedy(encode("Once"), 400));
  auto c = std::make_shared<Job>(greedy(encode("Once"), 400));
  EXPECT_TRUE(sched.submit(a));
  EXPECT_TRUE(sched.submit(b));  // waits in the queue
  EXPECT_FALSE(sched.submit(c));  // 1 slot + 1 queued
  a->cancel();
  b->cancel();
  EXPECT_EQ(a->wait_all().finish_reason, "cancelled");
  EXPECT_EQ(b->wait_all().finish_reason, "cancelled");
}

// A conversation that extends the previous one reuses its cached prefix,
// in the slot that holds it even when another slot is free.
TEST(ServerScheduler, ContinuedConversationReusesTheSlotsCache) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(2));
  auto first_prompt = encode("Once upon a time, there was a dog");
  auto first = std::make_shared<Job>(greedy(first_prompt, 10));
  ASSERT_TRUE(sched.submit(first));
  first->wait_all();
  auto unrelated = std::make_shared<Job>(greedy(encode("The sun"), 5));
  ASSERT_TRUE(sched.submit(unrelated));
  unrelated->wait_all();
  auto second_prompt = first_prompt;
  for (int32_t t : encode(" He liked to run")) second_prompt.push_back(t);
  auto second = std::make_shared<Job>(greedy(second_prompt, 5));
  ASSERT_TRUE(sched.submit(second));
  Job::Output out = second->wait_all();
  EXPECT_GE(out.usage.cached_tokens, static_cast<int>(first_prompt.size()));
  EXPECT_EQ(out.usage.prompt_tokens, static_cast<int>(second_prompt.size()));
}

// Each slot has its own KV cache of the full context size (not one context
// split across the slots): two requests generating at once, past
// end-of-sequence and without a max_tokens, each fill a whole context.
TEST(ServerScheduler, EachSlotHasTheWholeContext) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(2));
  const int ctx = sched.context_size();
  std::vector<std::shared_ptr<Job>> jobs;
  for (const char* text : {"Once upon a time", "The dog"}) {
    JobParams p = greedy(encode(text), 0);  // up to the context
    p.stop_at_eos = false;
    jobs.push_back(std::make_shared<Job>(p));
    ASSERT_TRUE(sched.submit(jobs.back()));
  }
  for (auto& job : jobs) {
    Job::Output out = job->wait_all();
    EXPECT_EQ(out.finish_reason, "length");
    // The last token is sampled but never run through the model, so the
    // cache is full at prompt + completion - 1 == ctx.
    EXPECT_EQ(out.usage.prompt_tokens + out.usage.completion_tokens - 1, ctx);
  }
  EXPECT_GT(sched.stats().decode_rows, sched.stats().decode_steps) << "the two slots never decoded together";
}

TEST(ServerScheduler, DeadlineEndsGeneration) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(1));
  JobParams p = greedy(encode("Once upon a time"), 0);  // up to the context
  p.deadline = std::chrono::steady_clock::now() + 30ms;
  auto job = std::make_shared<Job>(p);
  ASSERT_TRUE(sched.submit(job));
  auto t0 = std::chrono::steady_clock::now();
  Job::Output out = job->wait_all();
  EXPECT_EQ(out.finish_reason, "length");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// ---- response_format: constrained slots ------------------------------------

const char* kPersonSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},)"
    R"("age":{"type":"integer","minimum":0,"maximum":120},"ok":{"type":"boolean"}},"required":["name","age","ok"]})";
const char* kTagsSchema =
    R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]},)"
    R"("tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3}},"required":["color","tags"]})";

std::shared_ptr<const constrain::Constraint> compiled(const char* schema) {
  constrain::ConstraintSpec spec;
  spec.kind = schema ? constrain::ConstraintSpec::Kind::JsonSchema : constrain::ConstraintSpec::Kind::Json;
  if (schema) spec.text = schema;
  return constrain::compile_constraint(spec, *stories().tokenizer);
}

size_t code_points(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// The two schemas checked field by field (an independent check of the
// output, not the matcher's own verdict); objects are closed by default.
void expect_person(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);  // throws (fails the test) unless JSON
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_EQ(j.size(), 3u) << text;
  ASSERT_TRUE(j["name"].is_string()) << text;
  EXPECT_LE(code_points(j["name"].get<std::string>()), 12u) << text;
  ASSERT_TRUE(j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int64_t>(), 0) << text;
  EXPECT_LE(j["age"].get<int64_t>(), 120) << text;
  EXPECT_TRUE(j["ok"].is_boolean()) << text;
}

void expect_tags(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_EQ(j.size(), 2u) << text;
  ASSERT_TRUE(j["color"].is_string()) << text;
  const std::string c = j["color"].get<std::string>();
  EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << text;
  ASSERT_TRUE(j["tags"].is_array()) << text;
  EXPECT_LE(j["tags"].size(), 3u) << text;
  for (auto& t : j["tags"]) {
    ASSERT_TRUE(t.is_string()) << text;
    EXPECT_LE(code_points(t.get<std::string>()), 5u) << text;
  }
}

// Constrained requests with different schemas, a sampled one and plain
// requests decoded in one batch: every constrained output is complete
// ("stop") and valid, the greedy ones equal Session::generate with the same
// constraint alone, and the plain ones equal their unconstrained output
// alone (a neighbour's mask never leaks into another row).
TEST(ServerScheduler, ConstrainedAndPlainRequestsShareABatch) {
  const LoadedModel& m = stories();
  struct Case {
    const char* prompt;
    std::shared_ptr<const constrain::Constraint> constraint;
    float temperature;
    void (*check)(const std::string&);
    bool bounded;    // the schema bounds the output well under max_tokens
    int max_tokens;  // small for the free rows: they only need to share the steps
  };
  auto any_json = [](const std::string& t) { EXPECT_TRUE(nlohmann::json::accept(t)) << t; };
  const Case cases[] = {
      {"Once upon a time", compiled(kPersonSchema), 0.0f, expect_person, true, 120},
      {"The cat", compiled(kTagsSchema), 0.0f, expect_tags, true, 120},
      {"Lily and Ben", compiled(kPersonSchema), 1.0f, expect_person, true, 120},  // sampled: arbitrary tokens
      {"The dog", compiled(nullptr), 0.0f, any_json, false, 40},                  // json_object
      {"Once upon a time", nullptr, 0.0f, nullptr, false, 24},
      {"A bird", nullptr, 0.0f, nullptr, false, 24},
  };
  Scheduler sched(m.model, m.tokenizer, options(6));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const Case& c : cases) {
    JobParams p = greedy(encode(c.prompt), c.max_tokens);
    p.sampling.temperature = c.temperature;
    p.sampling.seed = 7;
    p.constraint = c.constraint;
    jobs.push_back(std::make_shared<Job>(p));
    ASSERT_TRUE(sched.submit(jobs.back()));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Case& c = cases[i];
    Job::Output out = jobs[i]->wait_all();
    EXPECT_TRUE(out.error.empty()) << out.error;
    const std::string text = joined(out);
    if (c.bounded) {
      EXPECT_EQ(out.finish_reason, "stop") << c.prompt << ": " << text;
    }
    if (c.constraint && out.finish_reason == "stop") c.check(text);
    // The reference runs cost as much again; under emulation the batch's
    // bit-exactness per ISA is the batch-invariance tests' job.
    if (c.temperature > 0 || test::emulated()) continue;
    Session alone(m.model, m.tokenizer, 256, 1);
    GenerateOptions go;
    go.max_tokens = c.max_tokens;
    go.sampling.temperature = 0;
    go.constraint = c.constraint;
    GenerateResult want = alone.generate(encode(c.prompt), go);
    EXPECT_EQ(text, want.text) << c.prompt;
    EXPECT_EQ(out.usage.completion_tokens, static_cast<int>(want.tokens.size())) << c.prompt;
    if (c.constraint) {
      EXPECT_EQ(out.finish_reason == "stop", want.constraint_complete) << c.prompt;
    }
  }
  SchedulerStats s = sched.stats();
  EXPECT_GT(s.decode_rows, s.decode_steps) << "the slots never shared a decode step";
  EXPECT_GT(s.constrained_tokens, 0u);
}

// max_tokens before the output is complete: "length", as with free text.
// A second request with the same constraint (a reused, reset matcher) gives
// the same output as the first.
TEST(ServerScheduler, ConstrainedRequestsEndAtMaxTokensAndReuseMatchers) {
  const LoadedModel& m = stories();
  Scheduler sched(m.model, m.tokenizer, options(1));
  auto constraint = compiled(kPersonSchema);
  auto run = [&](int max_tokens) {
    JobParams p = greedy(encode("Once upon a time"), max_tokens);
    p.constraint = constraint;
    auto job = std::make_shared<Job>(p);
    EXPECT_TRUE(sched.submit(job));
    return job->wait_all();
  };
  Job::Output cut = run(4);
  EXPECT_EQ(cut.finish_reason, "length");
  EXPECT_EQ(cut.usage.completion_tokens, 4);
  const std::string prefix = joined(cut);
  ASSERT_FALSE(prefix.empty());
  EXPECT_EQ(std::string("{\"name\":\"").rfind(prefix, 0), 0u) << prefix;  // the schema's first bytes
  Job::Output a = run(100), b = run(100);
  EXPECT_EQ(a.finish_reason, "stop");
  expect_person(joined(a));
  EXPECT_EQ(joined(a), joined(b));
  EXPECT_EQ(joined(a).rfind(prefix, 0), 0u);  // the cut one was its beginning
}

// The server's schema cache: one compile per distinct schema text, and a
// schema the compiler refuses is a 400 naming the field, the keyword and
// its JSON pointer.
TEST(ServerScheduler, SchemaCacheCompilesOnceAndRefusesUnsupportedKeywords) {
  ConstraintCache cache(stories().tokenizer, 2);
  constrain::ConstraintSpec spec;
  spec.kind = constrain::ConstraintSpec::Kind::JsonSchema;
  spec.text = kPersonSchema;
  const std::string param = "response_format.json_schema.schema";
  auto a = cache.get(spec, param);
  auto b = cache.get(spec, param);
  EXPECT_EQ(a, b);
  EXPECT_EQ(cache.stats().compiled, 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
  struct Bad {
    const char* schema;
    const char* says;
  };
  const Bad bad[] = {
      {R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})",
       "unsupported keyword 'uniqueItems' at /properties/a/uniqueItems"},
      {R"({"type":"string","format":"hostname"})", "unsupported format 'hostname' at /format"},
      {R"({"$ref":"#/$defs/missing"})", "points to nothing"},
      {R"({"type":"string","pattern":"(a"})", "/pattern"},
  };
  for (const Bad& x : bad) {
    spec.text = x.schema;
    try {
      cache.get(spec, param);
      ADD_FAILURE() << "accepted: " << x.schema;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, param);
      EXPECT_NE(std::string(e.what()).find(x.says), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("'" + param + "': ", 0), 0u) << e.what();
    }
  }
  // The LRU keeps `capacity` schemas: two others push the first one out.
  for (const char* other : {kTagsSchema, R"({"type":"integer"})"}) {
    spec.text = other;
    cache.get(spec, param);
  }
  spec.text = kPersonSchema;
  EXPECT_NE(cache.get(spec, param), a) << "the least recently used schema stayed cached";
  EXPECT_EQ(cache.stats().entries, 2u);
}

}  // namespace
}  // namespace pocket::server
