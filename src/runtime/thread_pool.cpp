#include "runtime/thread_pool.h"

#include <algorithm>

#include "util/error.h"

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
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  if (n_threads < 1 || n_threads > 256) fail("thread count ", n_threads, " is out of range [1, 256]");
  for (int i = 1; i < n_threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n, align;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      align = job_align_;
    }
    int64_t b, e;
    chunk(n, align, n_threads_, index, &b, &e);
    if (b < e) (*job)(b, e, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
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
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t b, e;
  chunk(n, align, n_threads_, 0, &b, &e);
  if (b < e) fn(b, e, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace pocket
