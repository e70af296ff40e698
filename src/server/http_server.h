// The HTTP side of `pocket serve` (cpp-httplib, kept out of this header):
// the OpenAI-compatible endpoints over a Scheduler, API-key check, body
// limit, Prometheus metrics. Built only when cpp-httplib is found.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/loader.h"
#include "server/scheduler.h"

namespace pocket::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0 = any free port (bind() returns it)
  std::string api_key;               // empty = no key needed
  size_t max_body = 1 << 20;         // bytes; larger bodies get 413
  double request_timeout_s = 600;    // per request, from arrival: generation ends ("length") at it
  std::string model_name;            // listed by /v1/models
  bool enable_thinking = true;       // Qwen3 chat template
  int http_threads = 0;              // 0 = slots + queue + 8
};

class HttpServer {
 public:
  HttpServer(Scheduler& scheduler, const LoadedModel& model, HttpOptions opt);
  ~HttpServer();
  // Binds the address; returns the port. Throws pocket::Error naming
  // host:port when it cannot.
  int bind();
  // Serves until stop() (from another thread or a signal handler thread).
  void serve();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pocket::server
