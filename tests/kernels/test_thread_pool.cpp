// ThreadPool: every index is covered exactly once by aligned chunks that
// shrink towards the end of a job, thread indices stay in range, and back-to-back jobs (the decode pattern) never
// mix, also with more threads than cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket {
namespace {

void check_cover(ThreadPool& pool, int64_t n, int64_t align) {
  SCOPED_TRACE(testing::Message() << "threads=" << pool.size() << " n=" << n << " align=" << align);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad{false};
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e, int thread) {
        if (b % align != 0 || b >= e || e > n || thread < 0 || thread >= pool.size()) bad = true;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      },
      align);
  EXPECT_FALSE(bad.load());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "i=" << i;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {1, 2, 15, 16, 17, 100, 1000, 64000})
      for (int64_t align : {1, 16}) {
        ThreadPool pool(threads);
        check_cover(pool, n, align);
      }
}

// Chunks shrink towards the end of a job, so the threads finish together:
// the first is at most 1/(2 x threads) of the job, each is no larger than
// the one before it (the last may be a remainder), and the last is at most
// 1/(16 x threads) of the job (plus alignment). Their number stays small.
TEST(ThreadPool, ChunksShrinkTowardsTheEnd) {
  for (int threads : {2, 4})
    for (int64_t n : {4096, 1000, 64000})
      for (int64_t align : {1, 16}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " n=" << n << " align=" << align);
        ThreadPool pool(threads);
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e, int) {
              std::lock_guard<std::mutex> lock(mu);
              chunks.emplace_back(b, e);
            },
            align);
        std::sort(chunks.begin(), chunks.end());
        ASSERT_GE(chunks.size(), 2u);
        const int64_t units = (n + align - 1) / align;
        EXPECT_LE(chunks.front().second, (units / (2 * threads) + 1) * align);
        for (size_t i = 1; i + 1 < chunks.size(); ++i)
          EXPECT_LE(chunks[i].second - chunks[i].first, chunks[i - 1].second - chunks[i - 1].first) << "chunk " << i;
        EXPECT_LE(chunks.back().second - chunks.back().first, n / (16 * threads) + align);
        EXPECT_LE(chunks.size(), static_cast<size_t>(32 * threads + 1));
      }
}

TEST(ThreadPool, ManyBackToBackJobsStayConsistent) {
  for (int threads : {2, 5}) {
    ThreadPool pool(threads);
    std::vector<int64_t> out(256);
    for (int job = 0; job < 3000; ++job) {
      pool.parallel_for(static_cast<int64_t>(out.size()), [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = job * 1000 + i;
      });
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], job * 1000 + static_cast<int64_t>(i)) << "job " << job;
    }
  }
}

TEST(ThreadPool, EmptyRangeAndBadSize) {
  ThreadPool pool(2);
  bool called = false;
  pool.parallel_for(0, [&](int64_t, int64_t, int) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_THROW(ThreadPool(0), Error);
}

// Sets an environment variable for one scope and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ThreadPool, MaxThreadsEnvironmentCapsEveryPool) {
  {
    ScopedEnv cap("POCKET_MAX_THREADS", "2");
    EXPECT_EQ(ThreadPool::thread_limit(), 2);
    ThreadPool pool(5);
    EXPECT_EQ(pool.size(), 2);
    check_cover(pool, 1000, 16);
    // Only two threads exist to run chunks (the pool once started workers
    // for the requested count: indices past size(), found by TSan timing).
    std::mutex mu;
    std::set<std::thread::id> ran;
    for (int job = 0; job < 200; ++job)
      pool.parallel_for(64, [&](int64_t, int64_t, int) {
        std::lock_guard<std::mutex> lock(mu);
        ran.insert(std::this_thread::get_id());
      });
    EXPECT_LE(ran.size(), 2u);
    EXPECT_EQ(ThreadPool(1).size(), 1);
  }
  for (const char* bad : {"0", "-1", "two", "2x", "257"}) {
    ScopedEnv cap("POCKET_MAX_THREADS", bad);
    EXPECT_THROW(ThreadPool(2), Error) << bad;
  }
  ScopedEnv none("POCKET_MAX_THREADS", "");
  EXPECT_EQ(ThreadPool(3).size(), 3);
}

}  // namespace
}  // namespace pocket
