// Slots and the batched scheduler of `pocket serve`. Each slot is a Session
// with its own KV cache of the full context size (a context is never split
// across slots). Requests wait in a bounded queue until a slot is free; the
// slot whose cached tokens share the longest prefix with the request's
// prompt takes it, so a conversation that extends its previous turn reuses
// that turn's keys and values. One worker thread runs everything: a prompt
// chunk (Model::kMaxBatch tokens) for each slot that is reading its prompt,
// then one decode step for every generating slot as one batched forward pass
// (Model::forward_decode: each weight read once per step for all of them).
// A request with a constraint (response_format) gets a matcher in its slot:
// the slot's logits are masked before sampling, the matcher advances with
// the chosen token, and the slot ends ("stop") when the output is a
// complete match. Matchers are reused across requests with the same
// compiled constraint (their mask caches stay warm).
// Cancellation (a client that went away) and the request deadline are
// checked before every step, so a cancelled request frees its slot within
// one decode step.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "generate/session.h"
#include "server/api.h"

namespace pocket::server {

struct JobParams {
  std::vector<int32_t> prompt;
  int max_tokens = 0;  // 0 = until the context is full
  std::vector<std::string> stop;
  SamplerConfig sampling;
  bool stop_at_eos = true;
  std::shared_ptr<const constrain::Constraint> constraint;  // null: free text
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// One request in flight: the scheduler produces text pieces and an end, a
// request handler takes them (from another thread) and may cancel.
class Job {
 public:
  explicit Job(JobParams p) : params_(std::move(p)) {}
  const JobParams& params() const { return params_; }

  // Tokens generated so far (for tests and progress).
  std::atomic<int> generated{0};

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  struct Output {
    std::vector<std::string> pieces;  // in order, each a complete UTF-8 piece
    bool finished = false;
    std::string finish_reason;  // "stop", "length", or "cancelled"
    Usage usage;
    std::string error;  // set when generation failed
  };
  // Waits up to `wait` for pieces or the end, and takes what is there.
  Output take(std::chrono::milliseconds wait);
  // Waits for the end and returns everything.
  Output wait_all();

  // Scheduler side.
  void emit(std::string piece);
  void finish(std::string reason, Usage usage, std::string error = {});

 private:
  JobParams params_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Output out_;
};

struct SchedulerOptions {
  int slots = 1;
  int ctx_size = 2048;  // per slot
  int threads = 1;
  int queue_limit = 64;
  bool batched = true;  // false: decode the slots one after another (for comparison)
  KVType kv = KVType::F16;  // every slot's KV cache
};

struct SchedulerStats {
  int slots = 0, busy = 0, queued = 0;
  uint64_t requests = 0, cancelled = 0, prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  uint64_t decode_steps = 0, decode_rows = 0;
  uint64_t constrained_tokens = 0;  // tokens sampled under a constraint
  double mask_seconds = 0;          // time spent getting their masks
  double recent_tokens_per_second = 0;  // generated tokens over the last 10 s
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, SchedulerOptions opt);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; false when the queue is full.
  bool submit(std::shared_ptr<Job> job);
  int context_size() const { return opt_.ctx_size; }
  SchedulerStats stats() const;

 private:
  struct Slot;
  void run();
  void start(Slot& s, std::shared_ptr<Job> job);
  void prefill_step(Slot& s);
  void decode_step(std::vector<Slot*>& rows);
  void after_logits(Slot& s, std::span<float> logits);
  int32_t sample(Slot& s, std::span<float> logits);
  void end(Slot& s, const char* reason, const std::string& error = {});

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tok_;
  SchedulerOptions opt_;
  std::vector<std::unique_ptr<Slot>> slots_;
  ThreadPool pool_;  // batched decode steps
  Model::DecodeScratch scratch_;
  std::vector<float> logits_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  int busy_ = 0;
  uint64_t use_clock_ = 0;  // worker thread only
  // Idle matchers of recent constraints, most recently used last (worker
  // thread only; at most slots + 4).
  std::vector<std::pair<std::shared_ptr<const constrain::Constraint>, std::unique_ptr<constrain::Matcher>>> idle_matchers_;
  SchedulerStats totals_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int>> recent_;  // decode steps of the last 10 s
  std::thread worker_;
};

}  // namespace pocket::server
