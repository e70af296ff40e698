// A persistent pool of worker threads. parallel_for splits [0, n) into
// chunks, large first and smaller towards the end, that threads claim one at
// a time from an atomic counter, so a thread the OS has descheduled holds up
// at most the chunk it is on while the others take the rest. Which thread
// runs a chunk varies; callers make each output element's computation
// independent of the chunking, so results do not depend on the thread count.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pocket {

class ThreadPool {
 public:
  // n_threads >= 1; the caller is thread 0. The environment variable
  // POCKET_MAX_THREADS caps every pool (containers with a CPU quota, CPUs
  // shared with the app's own threads, emulators where waiting threads crawl);
  // results do not depend on the thread count.
  explicit ThreadPool(int n_threads);
  static int thread_limit();  // POCKET_MAX_THREADS, or 256; a bad value is an Error
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(begin, end, thread_index) over a partition of [0, n) into chunks
  // whose boundaries are multiples of `align`; thread_index < size() names
  // the thread running the chunk (for per-thread scratch). Returns when all
  // chunks are done. Not reentrant: call from one thread at a time.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t align = 1);

 private:
  void worker(int index);
  // Claims and runs chunks of job `gen` until none are left.
  void run_chunks(uint32_t gen, int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  // claim_: generation (high 32 bits) | chunk count (16) | next chunk (16).
  // Claiming by compare-and-swap on the whole word means a worker that wakes
  // late can never take a chunk of a newer job with an older job's data.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> done_{0};  // chunks finished in the current job
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // The current job; written only while no chunk of the previous one runs.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  std::vector<int64_t> bounds_;  // chunk c is [bounds_[c], bounds_[c + 1])
  std::mutex mu_;
  std::condition_variable wake_cv_;
};

}  // namespace pocket
