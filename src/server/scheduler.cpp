#include "server/scheduler.h"

#include <algorithm>
#include <optional>

#include "generate/text_stream.h"
#include "util/error.h"

namespace pocket::server {

using Clock = std::chrono::steady_clock;

// ---- Job ---------------------------------------------------------------------

Job::Output Job::take(std::chrono::milliseconds wait) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, wait, [&] { return !out_.pieces.empty() || out_.finished; });
  Output o;
  o.pieces.swap(out_.pieces);
  o.finished = out_.finished;
  o.finish_reason = out_.finish_reason;
  o.usage = out_.usage;
  o.error = out_.error;
  return o;
}

Job::Output Job::wait_all() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return out_.finished; });
  return out_;
}

void Job::emit(std::string piece) {
  if (piece.empty()) return;
  {
    std::lock_guard lk(mu_);
    out_.pieces.push_back(std::move(piece));
  }
  cv_.notify_all();
}

void Job::finish(std::string reason, Usage usage, std::string error) {
  {
    std::lock_guard lk(mu_);
    out_.finished = true;
    out_.finish_reason = std::move(reason);
    out_.usage = usage;
    out_.error = std::move(error);
  }
  cv_.notify_all();
}

// ---- Scheduler ---------------------------------------------------------------

struct Scheduler::Slot {
  std::unique_ptr<Session> session;
  std::shared_ptr<Job> job;
  enum class State { Idle, Prefill, Decode } state = State::Idle;
  std::optional<Sampler> sampler;
  std::optional<TextStream> stream;
  std::vector<int32_t> history;  // prompt + generated (repetition penalty)
  int generated = 0, reused = 0, max_tokens = 0;
  int32_t pending = -1;  // sampled, not yet run through the model
  uint64_t last_used = 0;
};

namespace {
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}
}  // namespace

Scheduler::Scheduler(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
                     SchedulerOptions opt)
    : model_(std::move(model)), tok_(std::move(tokenizer)), opt_(opt), pool_(std::max(1, opt.threads)) {
  if (opt_.slots < 1) fail_as(ErrorCode::InvalidArgument, "the number of slots (", opt_.slots, ") must be >= 1");
  if (opt_.queue_limit < 0) fail_as(ErrorCode::InvalidArgument, "the queue limit must be >= 0");
  for (int i = 0; i < opt_.slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->session = std::make_unique<Session>(model_, tok_, opt_.ctx_size, std::max(1, opt_.threads));
    slots_.push_back(std::move(s));
  }
  logits_.resize(static_cast<size_t>(opt_.slots) * model_->config().vocab_size);
  totals_.slots = opt_.slots;
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  for (auto& job : queue_) job->finish("cancelled", {}, "the server is shutting down");
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard lk(mu_);
    // A job waits only when every slot is busy; the queue bounds those.
    if (static_cast<int>(queue_.size()) + busy_ >= opt_.slots + opt_.queue_limit) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lk(mu_);
  SchedulerStats s = totals_;
  s.busy = busy_;
  s.queued = static_cast<int>(queue_.size());
  const auto now = Clock::now();
  int tokens = 0;
  for (auto& [t, n] : recent_)
    if (now - t <= std::chrono::seconds(10)) tokens += n;
  s.recent_tokens_per_second = tokens / 10.0;
  return s;
}

void Scheduler::run() {
  std::vector<Slot*> rows;
  while (true) {
    std::vector<std::pair<Slot*, std::shared_ptr<Job>>> admitted;
    {
      std::unique_lock lk(mu_);
      auto idle = [&] { return busy_ < opt_.slots; };
      cv_.wait(lk, [&] { return stop_ || busy_ > 0 || !queue_.empty(); });
      if (stop_) break;
      while (!queue_.empty() && idle()) {
        std::shared_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        // The idle slot whose cache shares the longest prefix with the
        // prompt (one token, a BOS, does not count); among equals the one
        // used least recently, so other conversations' caches survive.
        Slot* best = nullptr;
        size_t best_len = 0;
        for (auto& s : slots_) {
          if (s->state != Slot::State::Idle || std::any_of(admitted.begin(), admitted.end(),
                                                            [&](auto& a) { return a.first == s.get(); }))
            continue;
          size_t n = common_prefix(s->session->cached_tokens(), job->params().prompt);
          if (n <= 1) n = 0;
          if (!best || n > best_len || (n == best_len && s->last_used < best->last_used)) best = s.get(), best_len = n;
        }
        best->last_used = ++use_clock_;
        ++busy_;
        admitted.emplace_back(best, std::move(job));
      }
    }
    for (auto& [slot, job] : admitted) start(*slot, std::move(job));
    for (auto& s : slots_)
      if (s->state == Slot::State::Prefill) prefill_step(*s);
    rows.clear();
    for (auto& s : slots_)
      if (s->state == Slot::State::Decode) rows.push_back(s.get());
    if (!rows.empty()) decode_step(rows);
  }
  for (auto& s : slots_)
    if (s->job) end(*s, "cancelled", "the server is shutting down");
}

void Scheduler::start(Slot& s, std::shared_ptr<Job> job) {
  const JobParams& p = job->params();
  s.job = std::move(job);
  s.generated = 0;
  s.pending = -1;
  s.history = p.prompt;
  s.sampler.emplace(p.sampling);
  s.stream.emplace(*tok_, p.stop);
  s.max_tokens = p.max_tokens > 0 ? p.max_tokens : opt_.ctx_size;
  const size_t n = common_prefix(s.session->cached_tokens(), p.prompt);
  s.reused = static_cast<int>(std::min(n, p.prompt.empty() ? 0 : p.prompt.size() - 1));
  s.state = Slot::State::Prefill;
  if (s.job->cancelled()) end(s, "cancelled");
  else if (Clock::now() >= p.deadline) end(s, "length");  // waited in the queue past its deadline
}

// One chunk of the prompt (Session::prefill stops after each batch when the
// progress callback says so; the batches run stay cached and the next call
// reuses them), so slots that are generating wait at most one chunk.
void Scheduler::prefill_step(Slot& s) {
  Job& job = *s.job;
  if (job.cancelled()) return end(s, "cancelled");
  std::span<float> logits;
  try {
    logits = s.session->prefill(job.params().prompt, [&] { return job.cancelled(); },
                                [](float done) { return done >= 1.0f; });
  } catch (const std::exception& e) {
    return end(s, "stop", e.what());
  }
  if (logits.empty()) {
    if (job.cancelled()) end(s, "cancelled");
    return;
  }
  {
    std::lock_guard lk(mu_);
    totals_.prompt_tokens += job.params().prompt.size();
    totals_.reused_tokens += static_cast<uint64_t>(s.reused);
  }
  after_logits(s, logits);
}

void Scheduler::decode_step(std::vector<Slot*>& rows) {
  // A request cancelled since the last step leaves before the next one.
  std::erase_if(rows, [&](Slot* s) {
    if (!s->job->cancelled()) return false;
    end(*s, "cancelled");
    return true;
  });
  if (rows.empty()) return;
  const size_t V = static_cast<size_t>(model_->config().vocab_size);
  try {
    if (rows.size() == 1 || !opt_.batched) {
      for (size_t i = 0; i < rows.size(); ++i) {
        Session& ses = *rows[i]->session;
        model_->forward(std::span<const int32_t>(&rows[i]->pending, 1), ses.context(), pool_, logits_.data() + i * V);
      }
    } else {
      std::vector<int32_t> tokens;
      std::vector<Context*> ctxs;
      for (Slot* s : rows) tokens.push_back(s->pending), ctxs.push_back(&s->session->context());
      model_->forward_decode(tokens, ctxs, pool_, logits_.data(), scratch_);
    }
  } catch (const std::exception& e) {
    for (Slot* s : rows) end(*s, "stop", e.what());
    return;
  }
  {
    std::lock_guard lk(mu_);
    ++totals_.decode_steps;
    totals_.decode_rows += rows.size();
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i]->session->append_cached(rows[i]->pending);
    after_logits(*rows[i], std::span<float>(logits_.data() + i * V, V));
  }
}

// Samples the next token and decides whether the slot goes on: the same
// order of checks as Session::generate.
void Scheduler::after_logits(Slot& s, std::span<float> logits) {
  Job& job = *s.job;
  const int32_t next = s.sampler->sample(logits, s.history);
  {
    std::lock_guard lk(mu_);
    const auto now = Clock::now();
    recent_.emplace_back(now, 1);
    while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
  }
  if (job.params().stop_at_eos && tok_->is_eos(next)) return end(s, "stop");
  ++s.generated;
  job.generated.store(s.generated);
  s.history.push_back(next);
  job.emit(s.stream->push(next));
  if (s.stream->stopped()) return end(s, "stop");
  if (s.generated >= s.max_tokens) return end(s, "length");
  const KVCache& cache = s.session->context().cache;
  if (cache.size() >= cache.capacity()) return end(s, "length");
  if (job.cancelled()) return end(s, "cancelled");
  if (Clock::now() >= job.params().deadline) return end(s, "length");
  s.pending = next;
  s.state = Slot::State::Decode;
}

void Scheduler::end(Slot& s, const char* reason, const std::string& error) {
  if (s.stream) s.job->emit(s.stream->finish());
  Usage u;
  u.prompt_tokens = static_cast<int>(s.job->params().prompt.size());
  u.completion_tokens = s.generated;
  u.cached_tokens = s.reused;
  s.job->finish(reason, u, error);
  {
    std::lock_guard lk(mu_);
    ++totals_.requests;
    if (std::string(reason) == "cancelled") ++totals_.cancelled;
    totals_.generated_tokens += static_cast<uint64_t>(s.generated);
    --busy_;
  }
  s.job.reset();
  s.sampler.reset();
  s.stream.reset();
  s.state = Slot::State::Idle;
}

}  // namespace pocket::server
