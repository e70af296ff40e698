#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "server/constraints.h"
#include "server/prompt.h"
#include "util/error.h"

namespace pocket::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() % 16];
  return s;
}

// Equal-time comparison, so the key cannot be guessed byte by byte.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  Scheduler& sched;
  const LoadedModel& model;
  HttpOptions opt;
  ConstraintCache constraints;
  httplib::Server http;
  int64_t started = std::time(nullptr);
  std::mutex mu;
  std::map<std::pair<std::string, int>, uint64_t> responses;  // (endpoint, status) -> count

  Impl(Scheduler& s, const LoadedModel& m, HttpOptions o)
      : sched(s), model(m), opt(std::move(o)), constraints(m.tokenizer) {}

  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void completion(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  std::string metrics();
};

void HttpServer::Impl::routes() {
  // httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind the same port and take half its connections silently.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_payload_max_length(opt.max_body);
  http.set_keep_alive_timeout(2);
  http.set_read_timeout(10);
  http.set_write_timeout(30);
  int threads = opt.http_threads > 0 ? opt.http_threads : 0;
  if (threads == 0) {
    SchedulerStats s = sched.stats();
    threads = s.slots + 64 + 8;
  }
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Before the body is read: a declared length over the limit gets the
    // 413 in OpenAI's shape (httplib's own 413, for bodies sent without a
    // length, has no body) and the connection is closed unread.
    if (req.has_header("Content-Length")) {
      const std::string len = req.get_header_value("Content-Length");
      if (len.size() > 18 || std::stoull("0" + len) > opt.max_body) {
        send_error(res, ApiError(413, "the request body (" + len + " bytes) is larger than the server's limit of " +
                                          std::to_string(opt.max_body) + " bytes"));
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, ApiError(413, "the request body is larger than the server's limit of " +
                                        std::to_string(opt.max_body) + " bytes"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "no endpoint " + req.method + " " + req.path +
                                        " (endpoints: POST /v1/chat/completions, POST /v1/completions, "
                                        "GET /v1/models, GET /health, GET /metrics)"));
    else
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status)));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
    std::string ep = "other";
    for (const char* k : known)
      if (req.path == k) ep = k;
    std::lock_guard lk(mu);
    ++responses[{ep, res.status}];
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
    if (authorized(q, r)) completion(q, r, Endpoint::Chat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
    if (authorized(q, r)) completion(q, r, Endpoint::Completion);
  });
  http.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& res) {
    if (authorized(q, res)) res.set_content(models_body(opt.model_name, started), "application/json");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    SchedulerStats s = sched.stats();
    res.set_content("{\"status\":\"ok\",\"slots\":" + std::to_string(s.slots) + ",\"slots_busy\":" +
                        std::to_string(s.busy) + ",\"queued\":" + std::to_string(s.queued) + "}",
                    "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request& q, httplib::Response& res) {
    if (authorized(q, res)) res.set_content(metrics(), "text/plain; version=0.0.4");
  });
}

// The key check runs in the handlers, after the body is read (a refusal
// before it would leave the body on a kept-alive connection).
bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (opt.api_key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), opt.api_key)) return true;
  send_error(res, ApiError(401, auth.empty() ? "an API key is required (Authorization: Bearer KEY)"
                                             : "the API key is not valid",
                           {}, "invalid_api_key"));
  return false;
}

void HttpServer::Impl::completion(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
  const auto arrived = Clock::now();
  std::shared_ptr<Job> job;
  ResponseMeta meta;
  bool stream = false;
  try {
    CompletionRequest r = parse_request(req.body, ep);
    const int ctx = sched.context_size();
    JobParams p;
    p.prompt = prompt_tokens(model, r, opt.enable_thinking);
    const char* param = ep == Endpoint::Chat ? "messages" : "prompt";
    if (p.prompt.empty()) throw ApiError(400, std::string("'") + param + "' gives no tokens", param);
    const int64_t need = static_cast<int64_t>(p.prompt.size()) + r.max_tokens.value_or(0);
    if (static_cast<int64_t>(p.prompt.size()) >= ctx || need > ctx)
      throw ApiError(400,
                     "this server's context (per slot) is " + std::to_string(ctx) + " tokens; the request needs " +
                         std::to_string(need) + " (" + std::to_string(p.prompt.size()) + " in the " + param +
                         (r.max_tokens ? ", " + std::to_string(*r.max_tokens) + " to generate" : std::string()) +
                         ")",
                     param, "context_length_exceeded");
    p.max_tokens = r.max_tokens.value_or(0);
    p.stop = r.stop;
    p.sampling = r.sampling;
    p.stop_at_eos = !r.ignore_eos;
    if (r.constraint.active()) p.constraint = constraints.get(r.constraint, r.constraint_param);
    if (!r.seeded) p.sampling.seed = std::random_device{}();
    p.deadline = arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.request_timeout_s));
    job = std::make_shared<Job>(std::move(p));
    if (!sched.submit(job)) {
      res.set_header("Retry-After", "1");
      throw ApiError(503, "the server is busy: every slot is generating and the queue is full; retry later", {},
                     "server_busy");
    }
    meta.endpoint = ep;
    meta.id = random_id(ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-");
    meta.created = std::time(nullptr);
    meta.model = r.model.empty() ? opt.model_name : r.model;
    stream = r.stream;
  } catch (const ApiError& e) {
    return send_error(res, e);
  } catch (const Error& e) {  // e.g. a chat template token missing from the vocabulary
    return send_error(res, ApiError(400, e.what()));
  }

  if (!stream) {
    Job::Output out = job->wait_all();
    if (!out.error.empty()) return send_error(res, ApiError(500, "generation failed: " + out.error));
    std::string text;
    for (auto& piece : out.pieces) text += piece;
    res.set_content(response_body(meta, text, out.finish_reason == "cancelled" ? "length" : out.finish_reason, out.usage),
                    "application/json");
    return;
  }
  struct State {
    bool started = false, ended = false;
    Clock::time_point last_write = Clock::now();
  };
  auto st = std::make_shared<State>();
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, meta, st](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          if (!sink.write(s.data(), s.size())) {
            job->cancel();  // the client went away
            return false;
          }
          st->last_write = Clock::now();
          return true;
        };
        if (!st->started) {
          st->started = true;
          if (meta.endpoint == Endpoint::Chat && !write(role_chunk(meta))) return false;
        }
        Job::Output out = job->take(std::chrono::milliseconds(200));
        for (const std::string& piece : out.pieces)
          if (!write(text_chunk(meta, piece))) return false;
        if (out.finished) {
          if (!out.error.empty()) {
            if (!write("data: " + ApiError(500, "generation failed: " + out.error).body() + "\n\n")) return false;
          } else {
            const std::string reason = out.finish_reason == "cancelled" ? "length" : out.finish_reason;
            if (!write(finish_chunk(meta, reason)) || !write(usage_chunk(meta, out.usage))) return false;
          }
          if (!write(done_event())) return false;
          st->ended = true;
          sink.done();
          return true;
        }
        // A comment line while nothing comes (a queued request, a long
        // prompt): clients ignore it, and a closed connection shows up.
        if (Clock::now() - st->last_write > std::chrono::seconds(1) && !write(": keep-alive\n\n")) return false;
        return true;
      },
      [job](bool) { job->cancel(); });  // whatever ended the response, the job ends too
}

std::string HttpServer::Impl::metrics() {
  SchedulerStats s = sched.stats();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
  };
  o << "# HELP pocket_http_responses_total HTTP responses by endpoint and status.\n"
       "# TYPE pocket_http_responses_total counter\n";
  {
    std::lock_guard lk(mu);
    for (auto& [key, n] : responses)
      o << "pocket_http_responses_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
  }
  metric("pocket_requests_finished_total", "counter", "Generation requests finished (any reason).", s.requests);
  metric("pocket_requests_cancelled_total", "counter", "Generation requests cancelled (client gone).", s.cancelled);
  metric("pocket_prompt_tokens_total", "counter", "Prompt tokens of finished prefills.", s.prompt_tokens);
  metric("pocket_prompt_tokens_reused_total", "counter", "Prompt tokens reused from a slot's KV cache.",
         s.reused_tokens);
  metric("pocket_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  metric("pocket_decode_steps_total", "counter", "Batched decode steps run.", s.decode_steps);
  metric("pocket_decode_rows_total", "counter", "Sequences decoded over all steps (rows / steps = mean batch).",
         s.decode_rows);
  metric("pocket_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.",
         s.recent_tokens_per_second);
  metric("pocket_constrained_tokens_total", "counter", "Tokens sampled under a response_format constraint.",
         s.constrained_tokens);
  metric("pocket_constraint_mask_seconds_total", "counter", "Time spent computing their token masks.",
         s.mask_seconds);
  const ConstraintCache::Stats c = constraints.stats();
  metric("pocket_schemas_compiled_total", "counter", "response_format schemas compiled (cache misses).", c.compiled);
  metric("pocket_schema_cache_hits_total", "counter", "response_format schemas found compiled in the cache.", c.hits);
  metric("pocket_queue_depth", "gauge", "Requests waiting for a slot.", s.queued);
  metric("pocket_slots_busy", "gauge", "Slots serving a request.", s.busy);
  metric("pocket_slots", "gauge", "Slots (parallel sequences).", s.slots);
  return o.str();
}

HttpServer::HttpServer(Scheduler& scheduler, const LoadedModel& model, HttpOptions opt)
    : impl_(std::make_unique<Impl>(scheduler, model, std::move(opt))) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const HttpOptions& o = impl_->opt;
  if (o.port == 0) {
    int port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on ", o.host, " (any port)");
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    fail("cannot listen on ", o.host, ":", o.port, " (address in use, or not an address of this machine?)");
  return o.port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }

void HttpServer::stop() { impl_->http.stop(); }

}  // namespace pocket::server
