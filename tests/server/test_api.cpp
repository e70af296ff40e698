// Request parsing and validation of the OpenAI-compatible server, and the
// exact JSON of its responses and errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api.h"

namespace pocket::server {
namespace {

using json = nlohmann::json;

// The ApiError a body gives (status, param, message), or fails the test.
ApiError error_of(const std::string& body, Endpoint ep = Endpoint::Chat) {
  try {
    parse_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

const char* kChat = R"({"model":"m","messages":[{"role":"user","content":"Hi"}]})";

TEST(ServerApi, ParsesAChatRequestWithOpenAIDefaults) {
  CompletionRequest r = parse_request(kChat, Endpoint::Chat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "Hi");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.seeded);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
}

TEST(ServerApi, ParsesEveryField) {
  CompletionRequest r = parse_request(
      R"({"model":"x","messages":[{"role":"system","content":"S"},{"role":"developer","content":"D"},
          {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
          {"role":"assistant","content":"A"}],
          "max_completion_tokens":7,"max_tokens":99,"temperature":0,"top_p":0.5,"seed":-3,"stop":["x","yz"],
          "stream":true,"stream_options":{"include_usage":true},"n":1,"response_format":{"type":"text"},
          "user":"ignored","presence_penalty":0,"ignore_eos":true})",
      Endpoint::Chat);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].role, "system");  // developer is the system role
  EXPECT_EQ(r.messages[2].content, "ab");
  EXPECT_EQ(r.max_tokens, 7);  // max_completion_tokens wins over the older max_tokens
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.sampling.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.ignore_eos);

  CompletionRequest c = parse_request(R"({"prompt":["Once"],"max_tokens":3,"stop":"."})", Endpoint::Completion);
  EXPECT_EQ(c.prompt, "Once");
  EXPECT_EQ(c.max_tokens, 3);
  EXPECT_EQ(c.stop, std::vector<std::string>{"."});
}

struct Bad {
  const char* body;
  const char* param;  // "" = none
  const char* says;   // part of the message
  Endpoint ep = Endpoint::Chat;
};

TEST(ServerApi, BadRequestsAre400sNamingTheField) {
  const Bad cases[] = {
      {"{", "", "not valid JSON"},
      {"\"text\"", "", "must be a JSON object"},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "", "not valid JSON"},  // invalid UTF-8
      {R"({"temperature":1e999,"messages":[{"role":"user","content":"x"}]})", "", "not valid JSON"},  // fuzz: was a 500
      {R"({})", "messages", "required"},
      {R"({"messages":{}})", "messages", "must be an array"},
      {R"({"messages":[]})", "messages", "must not be empty"},
      {R"({"messages":[1]})", "messages[0]", "must be an object"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].role", "supported roles"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content", "required"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content[0]", "only text"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content", "must be a string"},
      {R"({"model":5,"messages":[{"role":"user","content":"x"}]})", "model", "must be a string"},
      {R"({"max_tokens":"9","messages":[{"role":"user","content":"x"}]})", "max_tokens", "must be an integer"},
      {R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "between 1"},
      {R"({"max_tokens":2.5,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "must be an integer"},
      {R"({"max_completion_tokens":-1,"messages":[{"role":"user","content":"x"}]})", "max_completion_tokens", "between"},
      {R"({"temperature":3,"messages":[{"role":"user","content":"x"}]})", "temperature", "between 0"},
      {R"({"temperature":"hot","messages":[{"role":"user","content":"x"}]})", "temperature", "must be a number"},
      {R"({"top_p":0,"messages":[{"role":"user","content":"x"}]})", "top_p", "greater than 0"},
      {R"({"top_p":1.5,"messages":[{"role":"user","content":"x"}]})", "top_p", "between"},
      {R"({"seed":"x","messages":[{"role":"user","content":"x"}]})", "seed", "must be an integer"},
      {R"({"stop":5,"messages":[{"role":"user","content":"x"}]})", "stop", "must be a string"},
      {R"({"stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]})", "stop", "at most 4"},
      {R"({"stop":[""],"messages":[{"role":"user","content":"x"}]})", "stop[0]", "empty"},
      {R"({"stream":"yes","messages":[{"role":"user","content":"x"}]})", "stream", "true or false"},
      {R"({"ignore_eos":1,"messages":[{"role":"user","content":"x"}]})", "ignore_eos", "true or false"},
      {R"({"stream_options":{},"messages":[{"role":"user","content":"x"}]})", "stream_options", "only allowed"},
      {R"({"n":2,"messages":[{"role":"user","content":"x"}]})", "n", "must be 1"},
      {R"({"response_format":"json","messages":[{"role":"user","content":"x"}]})", "response_format", "object"},
      {R"({"response_format":{},"messages":[{"role":"user","content":"x"}]})", "response_format.type", "string"},
      {R"({"response_format":{"type":5},"messages":[{"role":"user","content":"x"}]})", "response_format.type",
       "string"},
      {R"({"response_format":{"type":"yaml"},"messages":[{"role":"user","content":"x"}]})", "response_format.type",
       "supported types"},
      {R"({"response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema", "required"},
      {R"({"response_format":{"type":"json_schema","json_schema":[]},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema", "must be an object"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"schema":{}}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.name", "required"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":7,"schema":{}}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.name", "must be a string"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.name", "letters, digits"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"p"}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.schema", "required"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":"{}"}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.schema", "must be an object"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{},"strict":"yes"}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.strict", "true or false"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{},"description":1}},"messages":[{"role":"user","content":"x"}]})",
       "response_format.json_schema.description", "must be a string"},
      {R"({"tools":[],"messages":[{"role":"user","content":"x"}]})", "tools", "not supported"},
      {R"({"logprobs":true,"messages":[{"role":"user","content":"x"}]})", "logprobs", "not supported"},
      {R"({"frequency_penalty":1,"messages":[{"role":"user","content":"x"}]})", "frequency_penalty", "not supported"},
      {R"({})", "prompt", "required", Endpoint::Completion},
      {R"({"prompt":""})", "prompt", "must not be empty", Endpoint::Completion},
      {R"({"prompt":["a","b"]})", "prompt", "array of 2 items", Endpoint::Completion},
      {R"({"prompt":[1,2,3]})", "prompt", "must be a string", Endpoint::Completion},
      {R"({"prompt":"x","echo":true})", "echo", "not supported", Endpoint::Completion},
  };
  for (const Bad& b : cases) {
    ApiError e = error_of(b.body, b.ep);
    EXPECT_EQ(e.status, 400) << b.body;
    EXPECT_EQ(e.param, b.param) << b.body;
    EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << b.body << " -> " << e.what();
    json j = json::parse(e.body());  // OpenAI's error shape
    ASSERT_TRUE(j.contains("error")) << e.body();
    EXPECT_EQ(j["error"]["message"], e.what());
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], b.param[0] ? json(b.param) : json(nullptr));
  }
}

TEST(ServerApi, ParsesResponseFormats) {
  auto with = [](const std::string& rf) {
    return parse_request(R"({"messages":[{"role":"user","content":"x"}],"response_format":)" + rf + "}", Endpoint::Chat);
  };
  using Kind = constrain::ConstraintSpec::Kind;
  EXPECT_EQ(with(R"({"type":"text"})").constraint.kind, Kind::None);
  CompletionRequest any = with(R"({"type":"json_object"})");
  EXPECT_EQ(any.constraint.kind, Kind::Json);
  EXPECT_EQ(any.constraint_param, "response_format");
  // The schema keeps the request's key order (the output's property order),
  // not the alphabetical order of a sorted map.
  CompletionRequest s = with(
      R"({"type":"json_schema","json_schema":{"name":"card-1","strict":true,"description":"d",
          "schema":{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},
                    "required":["zeta","alpha"]}}})");
  EXPECT_EQ(s.constraint.kind, Kind::JsonSchema);
  EXPECT_EQ(s.constraint_param, "response_format.json_schema.schema");
  EXPECT_EQ(s.constraint.text,
            R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},"required":["zeta","alpha"]})");
  // Completions take it too.
  CompletionRequest c = parse_request(R"({"prompt":"x","response_format":{"type":"json_object"}})", Endpoint::Completion);
  EXPECT_EQ(c.constraint.kind, Kind::Json);
}

TEST(ServerApi, ErrorBodiesHaveOpenAIsShape) {
  EXPECT_EQ(ApiError(401, "no key", "", "invalid_api_key").body(),
            R"({"error":{"message":"no key","type":"authentication_error","param":null,"code":"invalid_api_key"}})");
  EXPECT_EQ(ApiError(400, "big", "messages", "context_length_exceeded").body(),
            R"({"error":{"message":"big","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})");
  EXPECT_EQ(ApiError(503, "busy").type(), "server_busy_error");
  EXPECT_EQ(ApiError(413, "too big").type(), "invalid_request_error");
}

TEST(ServerApi, ResponseAndChunkShapes) {
  ResponseMeta m{Endpoint::Chat, "chatcmpl-1", 1700000000, "stories"};
  Usage u{5, 2, 1};
  EXPECT_EQ(response_body(m, "Hi \"x\"", "stop", u),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"stories","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \"x\""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}})");
  EXPECT_EQ(role_chunk(m),
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"
            "\"stories\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":"
            "null,\"finish_reason\":null}]}\n\n");
  EXPECT_EQ(finish_chunk(m, "length"),
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"
            "\"stories\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n");
  EXPECT_EQ(usage_chunk(m, u),
            "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"
            "\"stories\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7,"
            "\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n");
  EXPECT_EQ(done_event(), "data: [DONE]\n\n");
  ResponseMeta c{Endpoint::Completion, "cmpl-1", 1, "s"};
  EXPECT_EQ(text_chunk(c, "é"),
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"s\",\"choices\":[{"
            "\"index\":0,\"text\":\"é\",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
  EXPECT_EQ(models_body("s", 3), R"({"object":"list","data":[{"id":"s","object":"model","created":3,"owned_by":"pocket"}]})");
}

}  // namespace
}  // namespace pocket::server
