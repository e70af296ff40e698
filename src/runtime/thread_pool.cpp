#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "util/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pocket {

namespace {

void chunk(int64_t n, int64_t align, int parts, int index, int64_t* begin, int64_t* end) {
  int64_t units = (n + align - 1) / align;
  int64_t per = units / parts, extra = units % parts;
  int64_t b = index * per + std::min<int64_t>(index, extra);
  int64_t e = b + per + (index < extra ? 1 : 0);
  *begin = std::min(n, b * align);
  *end = std::min(n, e * align);
}

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// A decoded token issues ~200 parallel_for calls a few microseconds apart;
// waking sleeping threads through the kernel costs tens of microseconds
// each time, so both sides spin this long before falling back to sleeping.
constexpr auto kSpin = std::chrono::microseconds(100);

template <class Done>
bool spin_until(Done done) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return false;
  }
}

// generation_, pending_ and stop_ are read by spinning threads without the
// mutex, so every access to them goes through std::atomic_ref.
using Gen = std::atomic_ref<uint64_t>;
using Pending = std::atomic_ref<int>;
using Stop = std::atomic_ref<bool>;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1 || n_threads > 256) fail("thread count ", n_threads, " is out of range [1, 256]");
  for (int i = 1; i < n_threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Stop(stop_).store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return Stop(stop_).load(std::memory_order_acquire) || Gen(generation_).load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, ready);
    }
    if (Stop(stop_).load(std::memory_order_acquire)) return;
    // The acquire load of generation_ orders these reads after the writes
    // parallel_for made before publishing the new generation.
    seen = Gen(generation_).load(std::memory_order_acquire);
    const auto* job = job_;
    int64_t n = job_n_, align = job_align_;
    int64_t b, e;
    chunk(n, align, n_threads_, index, &b, &e);
    if (b < e) (*job)(b, e, index);
    if (Pending(pending_).fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's predicate check
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  if (n_threads_ == 1 || n <= align) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_align_ = align;
    Pending(pending_).store(n_threads_ - 1, std::memory_order_relaxed);
    Gen(generation_).fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  int64_t b, e;
  chunk(n, align, n_threads_, 0, &b, &e);
  if (b < e) fn(b, e, 0);
  auto done = [&] { return Pending(pending_).load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, done);
  }
}

}  // namespace pocket
