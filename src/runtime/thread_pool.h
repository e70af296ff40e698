// A persistent pool of worker threads. parallel_for splits [0, n) into
// contiguous chunks, one per thread, so each output element is always
// computed by the same code: results do not depend on the thread count.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pocket {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1; the caller is thread 0
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(begin, end, thread_index) over a partition of [0, n) into at most
  // size() chunks; `align` rounds chunk boundaries to multiples of it.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align = 1);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0, job_align_ = 1;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace pocket
