#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "util/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pocket {

namespace {

using Clock = std::chrono::steady_clock;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// A decoded token issues ~200 parallel_for calls microseconds apart, and a
// kernel wake-up costs tens of microseconds, so waiters first spin. On an
// oversubscribed machine spinning steals the core from the thread being
// waited for, so they then yield, and finally sleep.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr auto kYield = std::chrono::microseconds(2000);

enum class Waited { Done, Timeout };

template <class Ready>
Waited spin_then_yield(Ready ready) {
  const auto start = Clock::now();
  for (int i = 1;; ++i) {
    if (ready()) return Waited::Done;
    if (i % 64 != 0) {
      cpu_relax();
      continue;
    }
    auto waited = Clock::now() - start;
    if (waited > kSpin + kYield) return Waited::Timeout;
    if (waited > kSpin) std::this_thread::yield();
  }
}

// Chunks shrink as a job proceeds: each is about 1/(kShare x threads) of the
// units not yet handed out, but never below 1/(kMinShare x threads) of the
// job. Large first chunks keep each thread's share of a weight matrix one
// long stream; small last chunks let the threads finish together. (With 4
// equal chunks per thread, the thread that took the last one ran on while
// the others spun: ~8% of a 512-token prefill's CPU samples on Zen 4 at 2
// threads, ~2% with shrinking chunks.)
constexpr int64_t kShare = 2;
constexpr int64_t kMinShare = 16;

uint64_t pack(uint32_t gen, uint64_t chunks, uint64_t next) { return uint64_t{gen} << 32 | chunks << 16 | next; }
uint32_t gen_of(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
uint64_t chunks_of(uint64_t s) { return (s >> 16) & 0xffff; }
uint64_t next_of(uint64_t s) { return s & 0xffff; }

}  // namespace

int ThreadPool::thread_limit() {
  const char* env = std::getenv("POCKET_MAX_THREADS");
  if (!env || !*env) return 256;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 1 || v > 256) fail("POCKET_MAX_THREADS='", env, "' is not a thread count in [1, 256]");
  return static_cast<int>(v);
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads < 1 || n_threads > 256) fail("thread count ", n_threads, " is out of range [1, 256]");
  n_threads_ = std::min(n_threads, thread_limit());
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks(uint32_t gen, int index) {
  uint64_t s = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(s) != gen || next_of(s) >= chunks_of(s)) return;
    if (!claim_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The claimed chunk keeps job `gen` current until it is counted done,
    // and the acquire above made its fields visible.
    const uint64_t c = next_of(s);
    (*job_)(bounds_[c], bounds_[c + 1], index);
    done_.fetch_add(1, std::memory_order_release);
    s = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    auto ready = [&] { return stop_.load(std::memory_order_acquire) || gen_of(claim_.load(std::memory_order_acquire)) != seen; };
    if (spin_then_yield(ready) == Waited::Timeout) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst: pairs with parallel_for's publish
      wake_cv_.wait(lock, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = gen_of(claim_.load(std::memory_order_acquire));
    run_chunks(seen, index);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  const int64_t units = (n + align - 1) / align;
  if (n_threads_ == 1 || units <= 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t min_units = std::max<int64_t>(1, units / (n_threads_ * kMinShare));
  // No chunk of the previous job is running or claimable: safe to rewrite.
  bounds_.clear();
  for (int64_t at = 0; at < units;) {
    bounds_.push_back(at * align);
    at += std::max(min_units, (units - at) / (n_threads_ * kShare));
  }
  bounds_.push_back(n);
  // At most ~2 x kMinShare x 256 chunks: claim_'s 16-bit fields hold them.
  const uint64_t chunks = bounds_.size() - 1;
  job_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = gen_of(claim_.load(std::memory_order_relaxed)) + 1;
  claim_.store(pack(gen, chunks, 0));  // seq_cst: pairs with the sleepers_ increment
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // a sleeper is either waiting or will see the new job
    wake_cv_.notify_all();
  }
  run_chunks(gen, 0);
  auto all_done = [&] { return done_.load(std::memory_order_acquire) == chunks; };
  while (spin_then_yield(all_done) == Waited::Timeout) {
    // A worker was descheduled mid-chunk for milliseconds: stop competing.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace pocket
