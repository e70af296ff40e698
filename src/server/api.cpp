#include "server/api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace pocket::server {

// Requests are parsed keeping their key order: a JSON schema's properties
// come out in the order the client wrote them.
using json = nlohmann::ordered_json;
using ojson = nlohmann::ordered_json;

namespace {

// Text produced by the model is complete UTF-8; anything else would be
// replaced rather than make dump() throw.
std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

std::string type_name(const json& v) { return v.type_name(); }

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double lo, double hi) {
  const json& v = body.at(name);
  if (!v.is_number()) bad(name, std::string("'") + name + "' must be a number, not " + type_name(v));
  double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    bad(name, std::string("'") + name + "' is " + v.dump() + "; it must be between " + json(lo).dump() + " and " +
                  json(hi).dump());
  return d;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json& v = body.at(name);
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    bad(name, std::string("'") + name + "' must be an integer, not " + (v.is_number() ? v.dump() : type_name(v)));
  if (v.is_number_float() && std::fabs(v.get<double>()) > 9e15) bad(name, std::string("'") + name + "' is out of range");
  int64_t i = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                                     : (v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>()));
  if (i < lo || i > hi)
    bad(name, std::string("'") + name + "' is " + std::to_string(i) + "; it must be between " + std::to_string(lo) +
                  " and " + std::to_string(hi));
  return i;
}

// `path`: the field's full name in messages (default: `name`).
bool boolean(const json& body, const char* name, const std::string& path = {}) {
  const json& v = body.at(name);
  const std::string p = path.empty() ? name : path;
  if (!v.is_boolean()) bad(p, "'" + p + "' must be true or false, not " + type_name(v));
  return v.get<bool>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(param, "'" + param + "' must be a string or an array of text parts, not " + type_name(c));
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || part["type"] != "text")
      bad(p, "'" + p + "': only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    if (!part.contains("text") || !part["text"].is_string()) bad(p + ".text", "'" + p + ".text' must be a string");
    out += part["text"].get<std::string>();
  }
  return out;
}

void parse_messages(const json& body, CompletionRequest& r) {
  const json* m = field(body, "messages");
  if (!m) bad("messages", "'messages' is required");
  if (!m->is_array()) bad("messages", "'messages' must be an array, not " + type_name(*m));
  if (m->empty()) bad("messages", "'messages' must not be empty");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) bad(p, "'" + p + "' must be an object, not " + type_name(msg));
    const json* role = field(msg, "role");
    if (!role || !role->is_string()) bad(p + ".role", "'" + p + ".role' must be a string");
    std::string rs = role->get<std::string>();
    if (rs == "developer") rs = "system";  // OpenAI's newer name for the system role
    if (rs != "system" && rs != "user" && rs != "assistant")
      bad(p + ".role", "'" + p + ".role' is '" + role->get<std::string>() +
                           "'; supported roles: system, developer, user, assistant");
    const json* content = field(msg, "content");
    if (!content) bad(p + ".content", "'" + p + ".content' is required");
    r.messages.push_back({rs, content_text(*content, p + ".content")});
  }
}

void parse_prompt(const json& body, CompletionRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else {
    bad("prompt", "'prompt' must be a string (or an array of one string), not " +
                      (p->is_array() ? std::string("an array of ") + std::to_string(p->size()) + " items" : type_name(*p)));
  }
  if (r.prompt.empty()) bad("prompt", "'prompt' must not be empty");
}

void parse_stop(const json& body, CompletionRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  auto add = [&](const json& v, const std::string& p) {
    if (!v.is_string()) bad(p, "'" + p + "' must be a string, not " + type_name(v));
    if (v.get<std::string>().empty()) bad(p, "'" + p + "' must not be an empty string");
    r.stop.push_back(v.get<std::string>());
  };
  if (s->is_array()) {
    if (s->size() > 4) bad("stop", "'stop' has " + std::to_string(s->size()) + " strings; at most 4 are allowed");
    for (size_t i = 0; i < s->size(); ++i) add((*s)[i], "stop[" + std::to_string(i) + "]");
  } else {
    add(*s, "stop");
  }
}

// response_format: {"type": "text"}, {"type": "json_object"} (any JSON) or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"?,
// "description"?}}. The schema itself is compiled later (ConstraintCache).
void parse_response_format(const json& body, CompletionRequest& r) {
  const json* rf = field(body, "response_format");
  if (!rf) return;
  if (!rf->is_object()) bad("response_format", "'response_format' must be an object, not " + type_name(*rf));
  const json* type = field(*rf, "type");
  if (!type || !type->is_string())
    bad("response_format.type", "'response_format.type' must be a string: \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    r.constraint.kind = constrain::ConstraintSpec::Kind::Json;
    r.constraint_param = "response_format";
    return;
  }
  if (t != "json_schema")
    bad("response_format.type",
        "'response_format.type' is '" + t + "'; supported types: \"text\", \"json_object\", \"json_schema\"");
  const json* js = field(*rf, "json_schema");
  if (!js) bad("response_format.json_schema", "'response_format.json_schema' is required with type \"json_schema\"");
  if (!js->is_object())
    bad("response_format.json_schema", "'response_format.json_schema' must be an object, not " + type_name(*js));
  const json* name = field(*js, "name");
  if (!name) bad("response_format.json_schema.name", "'response_format.json_schema.name' is required");
  if (!name->is_string())
    bad("response_format.json_schema.name",
        "'response_format.json_schema.name' must be a string, not " + type_name(*name));
  const std::string n = name->get<std::string>();
  const bool name_ok = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!name_ok)
    bad("response_format.json_schema.name",
        "'response_format.json_schema.name' must be 1 to 64 letters, digits, underscores or dashes");
  if (const json* d = field(*js, "description"); d && !d->is_string())
    bad("response_format.json_schema.description",
        "'response_format.json_schema.description' must be a string, not " + type_name(*d));
  // strict: accepted either way; Pocket always enforces the schema (objects
  // closed unless additionalProperties says otherwise, as in strict mode).
  if (field(*js, "strict")) boolean(*js, "strict", "response_format.json_schema.strict");
  const json* schema = field(*js, "schema");
  if (!schema) bad("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
  if (!schema->is_object())
    bad("response_format.json_schema.schema",
        "'response_format.json_schema.schema' must be an object (a JSON Schema), not " + type_name(*schema));
  r.constraint.kind = constrain::ConstraintSpec::Kind::JsonSchema;
  r.constraint.text = dump(*schema);
  r.constraint_param = "response_format.json_schema.schema";
}

// Fields Pocket does not implement are refused by name rather than ignored,
// so a client never silently gets something other than what it asked for.
void refuse_unsupported(const json& body) {
  for (const char* name : {"tools", "functions", "tool_choice", "function_call", "logit_bias", "suffix", "audio"})
    if (field(body, name))
      throw ApiError(400, std::string("'") + name + "' is not supported by this server", name, "unsupported_parameter");
  for (const char* name : {"logprobs", "top_logprobs", "echo"}) {
    const json* v = field(body, name);
    if (v && !(v->is_boolean() && !v->get<bool>()) && !(v->is_number() && v->get<double>() == 0))
      throw ApiError(400, std::string("'") + name + "' is not supported by this server", name, "unsupported_parameter");
  }
  if (field(body, "n") && integer(body, "n", 1, 128) != 1)
    throw ApiError(400, "'n' must be 1 (one choice per request)", "n", "unsupported_parameter");
  if (field(body, "best_of") && integer(body, "best_of", 1, 128) != 1)
    throw ApiError(400, "'best_of' must be 1", "best_of", "unsupported_parameter");
}

}  // namespace

ApiError::ApiError(int s, std::string message, std::string p, std::string c)
    : std::runtime_error(std::move(message)), status(s), param(std::move(p)), code(std::move(c)) {}

std::string ApiError::type() const {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
    case 400:
      return "invalid_request_error";
    case 429:
    case 503:
      return "server_busy_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string ApiError::body() const {
  ojson e;
  e["message"] = what();
  e["type"] = type();
  e["param"] = param.empty() ? ojson(nullptr) : ojson(param);
  e["code"] = code.empty() ? ojson(nullptr) : ojson(code);
  return dump(ojson{{"error", e}});
}

CompletionRequest parse_request(std::string_view text, Endpoint endpoint) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    // Syntax errors, and numbers too large for a double (out_of_range 406),
    // which nlohmann throws from the same parse. Its message without the
    // "[json.exception...]" tag and without the raw bytes it quotes (which
    // may be invalid UTF-8).
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    if (auto at = what.find("; last read"); at != std::string::npos) what.resize(at);
    throw ApiError(400, "the request body is not valid JSON: " + what, {}, "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object, not " + type_name(body));
  CompletionRequest r;
  r.endpoint = endpoint;
  refuse_unsupported(body);
  parse_response_format(body, r);
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string, not " + type_name(*m));
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::Chat)
    parse_messages(body, r);
  else
    parse_prompt(body, r);
  constexpr int64_t kMaxTokens = 1 << 22;
  for (const char* name : {"max_completion_tokens", "max_tokens"})
    if (field(body, name) && !r.max_tokens) r.max_tokens = static_cast<int>(integer(body, name, 1, kMaxTokens));
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.min_p = 0.0f;
  if (field(body, "temperature")) r.sampling.temperature = static_cast<float>(number(body, "temperature", 0, 2));
  if (field(body, "top_p")) r.sampling.top_p = static_cast<float>(number(body, "top_p", 0, 1));
  if (r.sampling.top_p == 0.0f) bad("top_p", "'top_p' must be greater than 0");
  if (field(body, "seed")) {
    r.sampling.seed = static_cast<uint64_t>(integer(body, "seed", INT64_MIN, INT64_MAX));
    r.seeded = true;
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"})
    if (field(body, name) && number(body, name, -2, 2) != 0)
      throw ApiError(400, std::string("'") + name + "' is not supported by this server (only 0)", name,
                     "unsupported_parameter");
  parse_stop(body, r);
  if (field(body, "stream")) r.stream = boolean(body, "stream");
  if (field(body, "ignore_eos")) r.ignore_eos = boolean(body, "ignore_eos");
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object, not " + type_name(*so));
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (field(*so, "include_usage")) boolean(*so, "include_usage");  // usage is always sent
  }
  return r;
}

namespace {

ojson head(const ResponseMeta& m, bool chunk) {
  ojson j;
  j["id"] = m.id;
  j["object"] = m.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  j["created"] = m.created;
  j["model"] = m.model;
  return j;
}

ojson usage_json(const Usage& u) {
  ojson j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = ojson{{"cached_tokens", u.cached_tokens}};
  return j;
}

// One choice of a chunk: chat has a delta, completions the text itself.
std::string chunk(const ResponseMeta& m, const ojson& delta, const std::string& text, const ojson& finish) {
  ojson c;
  c["index"] = 0;
  if (m.endpoint == Endpoint::Chat) {
    c["delta"] = delta;
    c["logprobs"] = nullptr;
  } else {
    c["text"] = text;
    c["logprobs"] = nullptr;
  }
  c["finish_reason"] = finish;
  ojson j = head(m, true);
  j["choices"] = ojson::array({c});
  return "data: " + dump(j) + "\n\n";
}

}  // namespace

std::string response_body(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                          const Usage& usage) {
  ojson c;
  c["index"] = 0;
  if (m.endpoint == Endpoint::Chat) {
    c["message"] = ojson{{"role", "assistant"}, {"content", text}};
  } else {
    c["text"] = text;
  }
  c["logprobs"] = nullptr;
  c["finish_reason"] = finish_reason;
  ojson j = head(m, false);
  j["choices"] = ojson::array({c});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string role_chunk(const ResponseMeta& m) {
  return chunk(m, ojson{{"role", "assistant"}, {"content", ""}}, "", nullptr);
}

std::string text_chunk(const ResponseMeta& m, const std::string& text) {
  return chunk(m, ojson{{"content", text}}, text, nullptr);
}

std::string finish_chunk(const ResponseMeta& m, const std::string& finish_reason) {
  return chunk(m, ojson::object(), "", finish_reason);
}

std::string usage_chunk(const ResponseMeta& m, const Usage& usage) {
  ojson j = head(m, true);
  j["choices"] = ojson::array();
  j["usage"] = usage_json(usage);
  return "data: " + dump(j) + "\n\n";
}

std::string done_event() { return "data: [DONE]\n\n"; }

std::string models_body(const std::string& model, int64_t created) {
  ojson m;
  m["id"] = model;
  m["object"] = "model";
  m["created"] = created;
  m["owned_by"] = "pocket";
  return dump(ojson{{"object", "list"}, {"data", ojson::array({m})}});
}

}  // namespace pocket::server
