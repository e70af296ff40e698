// src/server/: the OpenAI-compatible HTTP server behind `pocket serve`. It
// owns the HTTP endpoints (http_server.*, the only part that needs
// cpp-httplib), request parsing and validation and the JSON / server-sent
// event shapes of responses (api.*), and the slots with their batched
// scheduler (scheduler.*), which runs the decode steps of all active slots as
// one forward pass.
//
// This file: requests as the OpenAI API defines them, checked field by field
// (a wrong type or value is a 400 naming the field), and the response bodies
// and stream chunks, built here so tests can compare exact bytes.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/constraint.h"
#include "generate/chat.h"
#include "generate/sampler.h"

namespace pocket::server {

// An error answered in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});
  int status;
  std::string param, code;
  std::string type() const;  // invalid_request_error, authentication_error, ...
  std::string body() const;
};

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  std::optional<int> max_tokens;      // max_tokens / max_completion_tokens; unset = up to the context
  SamplerConfig sampling;             // OpenAI defaults: temperature 1, top_p 1, no top-k / min-p
  bool seeded = false;                // "seed" given (else the server picks one)
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;  // extension (as llama.cpp's server): generate past end-of-sequence tokens
  // response_format: "json_object" is any JSON, "json_schema" its schema
  // (the text keeps the request's key order, which is the output's order);
  // kind None for "text" or no response_format. constraint_param is the
  // field a compile error names (response_format.json_schema.schema).
  constrain::ConstraintSpec constraint;
  std::string constraint_param;
};

// Parses and validates a request body; throws ApiError (400) naming the
// field at fault. Unknown fields are ignored, as OpenAI's own server does for
// optional extensions; fields Pocket cannot honour yet are refused by name
// (tools, logprobs, n > 1, ...). response_format's shape is checked here;
// its schema is compiled later (ConstraintCache), where an unsupported
// keyword is a 400 too.
CompletionRequest parse_request(std::string_view body, Endpoint endpoint);

// finish_reason values: "stop" (end of sequence or a stop string), "length"
// (max_tokens, the context or the request deadline).
struct Usage {
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// What every response of one request shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;       // chatcmpl-... / cmpl-...
  int64_t created = 0;  // Unix seconds
  std::string model;
};

std::string response_body(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                          const Usage& usage);

// Server-sent events of a streamed response, in order: role_chunk (chat
// only), one text_chunk per piece, finish_chunk, usage_chunk, done_event.
std::string role_chunk(const ResponseMeta& m);
std::string text_chunk(const ResponseMeta& m, const std::string& text);
std::string finish_chunk(const ResponseMeta& m, const std::string& finish_reason);
std::string usage_chunk(const ResponseMeta& m, const Usage& usage);
std::string done_event();

std::string models_body(const std::string& model, int64_t created);

}  // namespace pocket::server
