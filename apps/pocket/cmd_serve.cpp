// pocket serve: the OpenAI-compatible HTTP server (src/server/).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cli_common.h"
#include "memory_flags.h"
#include "server/scheduler.h"
#include "util/error.h"
#ifdef POCKET_HAVE_HTTP
#include "server/http_server.h"
#endif

namespace pocket::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 1;
  int queue = 64;
  std::string api_key;
  std::string model_name;
  double timeout = 600;
  size_t max_body = 1 << 20;
  bool no_think = false;
  bool no_batch = false;
  int mem_budget_mb = 0;
};

#ifdef POCKET_HAVE_HTTP
int serve(ServeOptions o) {
  if (o.api_key.empty())
    if (const char* k = std::getenv("POCKET_API_KEY"); k && *k) o.api_key = k;
  // SIGINT / SIGTERM go to one waiting thread that stops the server; every
  // other thread (created below) inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end of the server

  std::string path;
  // Under a budget every slot's KV cache and scratch must fit beside the
  // weights: the plan covers `parallel` sessions and chooses the context
  // (and the KV type, without --kv) per slot.
  LoadedModel m = o.mem_budget_mb > 0 ? load_planned(o.model, o.mem_budget_mb, 0, o.parallel, &path) : o.model.load(&path);
  server::SchedulerOptions so;
  so.slots = o.parallel;
  so.ctx_size = m.plan ? m.plan->context : o.model.resolve_context(m.model->config());
  so.kv = m.plan ? m.plan->kv_type : o.model.kv_type();
  so.threads = o.model.resolve_threads();
  so.queue_limit = o.queue;
  so.batched = !o.no_batch;
  server::Scheduler sched(m.model, m.tokenizer, so);
  server::HttpOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.api_key = o.api_key;
  ho.max_body = o.max_body;
  ho.request_timeout_s = o.timeout;
  ho.enable_thinking = !o.no_think;
  ho.model_name = o.model_name.empty() ? std::filesystem::path(path).filename().string() : o.model_name;
  ho.http_threads = o.parallel + o.queue + 8;
  server::HttpServer http(sched, m, ho);
  const int port = http.bind();
  std::fprintf(stderr,
               "pocket: serving %s as \"%s\" on http://%s:%d (%d slot%s x %d tokens of %s context, %d thread%s, "
               "%s template%s)\n",
               path.c_str(), ho.model_name.c_str(), o.host.c_str(), port, so.slots, so.slots == 1 ? "" : "s",
               so.ctx_size, kv_type_name(so.kv), so.threads, so.threads == 1 ? "" : "s", chat_format_name(m.chat_format),
               o.api_key.empty() ? "" : ", API key required");
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "pocket: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http.stop();
  });
  http.serve();
  pthread_kill(waiter.native_handle(), SIGTERM);  // if serve() ended by itself, end the waiter too
  waiter.join();
  return 0;
}
#else
int serve(ServeOptions) {
  fail("this pocket was built without cpp-httplib, so `pocket serve` is not available "
       "(install libcpp-httplib-dev and rebuild)");
}
#endif

}  // namespace

void add_serve(CLI::App& app, int& rc) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat/completions, completions, models)");
  o->model.add_to(*cmd);
  o->model.add_kv_to(*cmd);
  cmd->add_option("--mem-budget", o->mem_budget_mb,
                  "Memory budget in MiB for the model and every slot (KV cache and scratch each); without -c the "
                  "largest context per slot that fits is chosen, else an error giving the numbers")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--host", o->host, "Address to listen on (default: loopback only)");
  cmd->add_option("--port", o->port, "Port (0 = any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("-p,--parallel", o->parallel, "Slots: requests generated at once, each with its own context")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--queue", o->queue, "Requests that may wait for a slot; beyond them 503")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' (or set $POCKET_API_KEY)");
  cmd->add_option("--model-name", o->model_name, "Name listed by /v1/models (default: the model's file name)");
  cmd->add_option("--timeout", o->timeout, "Per-request deadline in seconds (generation ends there)")
      ->check(CLI::Range(0.001, 1e7));
  cmd->add_option("--max-body", o->max_body, "Largest request body in bytes (larger: 413)")
      ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  cmd->add_flag("--no-think", o->no_think, "Qwen3: answer without a thinking block");
  cmd->add_flag("--no-batch", o->no_batch, "Decode the slots one after another instead of in one batch (comparison)");
  cmd->callback([o, &rc] { rc = serve(*o); });
}

}  // namespace pocket::cli
