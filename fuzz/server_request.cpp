// fuzz_server_request: the input is one HTTP request body as `pocket serve`
// receives it on /v1/chat/completions (first byte even) or /v1/completions
// (odd); bit 1 of that byte turns thinking on. parse_request() must answer
// every body with a CompletionRequest or an ApiError (a 4xx naming the
// field): any other exception escapes and is a finding. A request that parses
// is turned into prompt tokens with the real Qwen3 tokenizer in the chat
// family chosen by bits 2-3 (as the server does before queueing it), and its
// text goes through the response builders, whose JSON must parse and give the
// text back byte for byte (the server echoes model text into JSON and SSE).
// A response_format schema is compiled as the server does (ConstraintCache):
// a schema the compiler refuses must be a 400 as well.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "server/api.h"
#include "server/constraints.h"
#include "server/prompt.h"

namespace {

void check_round_trip(const std::string& body, const char* pointer, const std::string& text) {
  const std::string_view payload = body.starts_with("data: ") ? std::string_view(body).substr(6) : body;
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
  if (j.is_discarded()) pocket::fuzz::finding(std::string("response is not JSON: ") + body);
  if (j.value(nlohmann::json::json_pointer(pointer), std::string("\x01<missing>")) != text)
    pocket::fuzz::finding(std::string("response text differs at ") + pointer);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {  // the slow loads, outside the first input's time limit
  pocket::fuzz::qwen3_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using namespace pocket::server;
  fuzz::Bytes in(data, size);
  const uint8_t flags = in.take_byte();
  const Endpoint endpoint = flags & 1 ? Endpoint::Completion : Endpoint::Chat;
  CompletionRequest r;
  try {
    r = parse_request(in.rest(), endpoint);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 499) fuzz::finding("a bad request answered with status " + std::to_string(e.status));
    if (nlohmann::json::parse(e.body(), nullptr, false).is_discarded()) fuzz::finding("error body is not JSON");
    return 0;
  }
  static const ChatFormat kFormats[] = {ChatFormat::Qwen3, ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Gemma};
  const std::shared_ptr<const Tokenizer>& qwen = fuzz::qwen3_tokenizer_ptr();
  LoadedModel m;
  m.tokenizer = qwen;
  m.chat_format = kFormats[(flags >> 2) & 3];
  fuzz::guarded([&] { prompt_tokens(m, r, flags & 2); });
  if (r.constraint.active()) {
    static ConstraintCache constraints(qwen, 1);  // size 1: every new schema is compiled
    try {
      constraints.get(r.constraint, r.constraint_param);
    } catch (const ApiError& e) {
      if (e.status != 400) fuzz::finding("a bad schema answered with status " + std::to_string(e.status));
    }
  }

  std::string text = r.prompt;
  for (const ChatMessage& msg : r.messages) text += msg.content;
  ResponseMeta meta{endpoint, "id-1", 1, r.model};
  const bool chat = endpoint == Endpoint::Chat;
  check_round_trip(response_body(meta, text, "stop", Usage{}), chat ? "/choices/0/message/content" : "/choices/0/text", text);
  check_round_trip(text_chunk(meta, text), chat ? "/choices/0/delta/content" : "/choices/0/text", text);
  check_round_trip(response_body(meta, "", "length", Usage{}), "/model", r.model);
  return 0;
}
