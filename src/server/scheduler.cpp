#include "server/scheduler.h"

#include <algorithm>
#include <optional>

#include "generate/constrained_sample.h"
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
  std::unique_ptr<constrain::Matcher> matcher;  // with a constraint
  std::vector<int32_t> history;  // prompt + generated (repetition penalty)
  int generated = 0, reused = 0, max_tokens = 0;
  int32_t pending = -1;  // sampled, not yet run through the model
  uint64_t last_used = 0;
};

namespace {
// Mask cache bytes per matcher (the library default, 256 MiB, is meant for
// one generation at a time; a server holds several).
constexpr size_t kMatcherCacheBytes = size_t{32} << 20;

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
    s->session = std::make_unique<Session>(model_, tok_, opt_.ctx_size, std::max(1, opt_.threads), 0, opt_.kv);
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
  if (p.constraint) {
    // A warm matcher of the same constraint if one is idle, else a new one.
    auto it = std::find_if(idle_matchers_.rbegin(), idle_matchers_.rend(),
                           [&](auto& e) { return e.first == p.constraint; });
    if (it != idle_matchers_.rend()) {
      s.matcher = std::move(it->second);
      idle_matchers_.erase(std::next(it).base());
    } else {
      s.matcher = std::make_unique<constrain::Matcher>(p.constraint->matcher());
      s.matcher->set_cache_limit(kMatcherCacheBytes);
    }
    // The text must be exactly the bytes the matcher saw: no SentencePiece
    // leading-space stripping at the start of the continuation.
    s.stream->continue_after(INT32_MAX);
  }
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
  int32_t next;
  try {
    next = sample(s, logits);
  } catch (const std::exception& e) {
    return end(s, "stop", e.what());
  }
  {
    std::lock_guard lk(mu_);
    const auto now = Clock::now();
    recent_.emplace_back(now, 1);
    while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
  }
  // Under a constraint an end-of-sequence id is allowed only where the
  // output is complete, and it ends the output even with ignore_eos.
  if ((job.params().stop_at_eos || s.matcher) && tok_->is_eos(next)) return end(s, "stop");
  ++s.generated;
  job.generated.store(s.generated);
  s.history.push_back(next);
  job.emit(s.stream->push(next));
  if (s.stream->stopped()) return end(s, "stop");
  if (s.matcher && s.matcher->complete()) return end(s, "stop");  // nothing may follow
  if (s.generated >= s.max_tokens) return end(s, "length");
  const KVCache& cache = s.session->context().cache;
  if (cache.size() >= cache.capacity()) return end(s, "length");
  if (job.cancelled()) return end(s, "cancelled");
  if (Clock::now() >= job.params().deadline) return end(s, "length");
  s.pending = next;
  s.state = Slot::State::Decode;
}

// The slot's next token: under a constraint, from the masked logits, and
// the matcher moves by it. Throws when the constraint allows no token.
int32_t Scheduler::sample(Slot& s, std::span<float> logits) {
  if (!s.matcher) return s.sampler->sample(logits, s.history);
  float us = 0;
  const int32_t next = sample_constrained(*s.sampler, *s.matcher, logits, s.history, &us);
  std::lock_guard lk(mu_);
  ++totals_.constrained_tokens;
  totals_.mask_seconds += us * 1e-6;
  return next;
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
  if (s.matcher) {
    s.matcher->reset();
    idle_matchers_.emplace_back(s.job->params().constraint, std::move(s.matcher));
    if (idle_matchers_.size() > slots_.size() + 4) idle_matchers_.erase(idle_matchers_.begin());
  }
  s.job.reset();
  s.sampler.reset();
  s.stream.reset();
  s.state = Slot::State::Idle;
}

}  // namespace pocket::server
