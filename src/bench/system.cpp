#include "bench/system.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket::bench {

namespace {

std::optional<uint64_t> read_u64_file(const char* path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

namespace {
std::optional<uint64_t> proc_kb(const char* path, const char* field) {
  std::ifstream in(path);
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      unsigned long long kb = 0;
      if (std::sscanf(line.c_str() + n + 1, "%llu", &kb) == 1) return kb;
    }
  }
  return std::nullopt;
}
}  // namespace

std::optional<uint64_t> proc_status_kb(const char* field) { return proc_kb("/proc/self/status", field); }

std::optional<uint64_t> pss_kb() { return proc_kb("/proc/self/smaps_rollup", "Pss"); }

std::optional<uint64_t> pss_memory_kb() {
  const auto anon = proc_kb("/proc/self/smaps_rollup", "Pss_Anon");
  const auto shmem = proc_kb("/proc/self/smaps_rollup", "Pss_Shmem");
  if (!anon || !shmem) return std::nullopt;
  return *anon + *shmem;
}

double rss_mb(const char* field) {
  auto kb = proc_status_kb(field);
  if (!kb) fail("/proc/self/status: no ", field, " field");
  return static_cast<double>(*kb) / 1024.0;
}

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::optional<uint64_t> rapl_energy_uj() { return read_u64_file("/sys/class/powercap/intel-rapl:0/energy_uj"); }
std::optional<uint64_t> rapl_max_energy_uj() {
  return read_u64_file("/sys/class/powercap/intel-rapl:0/max_energy_range_uj");
}

std::optional<uint64_t> parse_cache_size(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t unit = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M' || text.back() == 'G')) {
    unit = text.back() == 'K' ? uint64_t{1} << 10 : text.back() == 'M' ? uint64_t{1} << 20 : uint64_t{1} << 30;
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 12) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT64_MAX / unit) return std::nullopt;
  return v * unit;
}

std::optional<uint64_t> last_level_cache_bytes(const std::string& dir) {
  int best_level = 0;
  std::optional<uint64_t> best;
  for (int i = 0; i < 16; ++i) {
    const std::string idx = dir + "/index" + std::to_string(i);
    std::ifstream lv(idx + "/level"), sz(idx + "/size");
    int level = 0;
    std::string size;
    if (!(lv >> level) || !std::getline(sz, size)) continue;
    const std::optional<uint64_t> bytes = parse_cache_size(size);
    if (!bytes) continue;
    if (level > best_level || (level == best_level && *bytes > best.value_or(0))) best_level = level, best = bytes;
  }
  return best;
}

uint64_t sum_in_streams(const uint64_t* buf, int64_t b, int64_t e) {
  // Four interleaved streams (the slice's quarters, side by side), as a
  // matmul reads several rows at once: one stream per core leaves bandwidth
  // unused on machines whose prefetchers track several streams, and the
  // figure would flatter the kernels measured against it. The streams start
  // kSkew elements (17 pages and 5 lines) past the quarter points: quarters
  // of a power-of-two buffer put the four reads exactly 2^k bytes apart, on
  // the same DRAM banks at the same time. Zen 4 guest, 1 GiB, one thread
  // (one slice, streams 256 MB apart): 9.1-9.8 GB/s against 22-28 so
  // staggered, while its 1-thread decode read ~21 GB/s ("224% of the
  // bandwidth"); at two threads (32 MB apart) both read the same within the
  // host's swings (30-51 GB/s over minutes).
  constexpr int64_t kSkew = (17 * 4096 + 5 * 64) / sizeof(uint64_t);
  const int64_t q = (e - b) / 4, skew = std::min(kSkew, q / 8);
  int64_t start[5];
  for (int i = 0; i < 4; ++i) start[i] = b + i * (q + skew);
  start[4] = e;
  int64_t m = start[1] - start[0];  // the shortest stream's length, read in lockstep
  for (int k = 1; k < 4; ++k) m = std::min(m, start[k + 1] - start[k]);
  const uint64_t *s0p = buf + start[0], *s1p = buf + start[1], *s2p = buf + start[2], *s3p = buf + start[3];
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i < m; ++i) {
    s0 += s0p[i];
    s1 += s1p[i];
    s2 += s2p[i];
    s3 += s3p[i];
  }
  for (int k = 0; k < 4; ++k)  // the longer streams' ends
    for (int64_t i = start[k] + m; i < start[k + 1]; ++i) s0 += buf[i];
  return s0 + s1 + s2 + s3;
}

double measure_read_bandwidth(int threads, uint64_t bytes, int reps) {
  if (threads < 1 || reps < 1 || bytes < 4096) fail("bandwidth test: bad parameters");
  const size_t n = static_cast<size_t>(bytes / sizeof(uint64_t));
  // Mapped and unmapped here rather than allocated, so its pages leave the
  // process when the probe ends whatever the allocator keeps (pocket bench
  // probes between runs and must not count the buffer in the peak memory;
  // sanitizer allocators quarantine freed blocks). Each thread writes (and
  // so faults in) its own slice first, placing the pages where they are read.
  const size_t len = n * sizeof(uint64_t);
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fail("bandwidth test: cannot map ", len, " bytes");
  struct Unmap {
    size_t len;
    void operator()(uint64_t* p) const { munmap(p, len); }
  };
  std::unique_ptr<uint64_t[], Unmap> buf(static_cast<uint64_t*>(mem), Unmap{len});
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  }, 8);
  auto pass = [&] {
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int t) {
      sums[static_cast<size_t>(t)] += sum_in_streams(buf.get(), b, e);
    }, 8);
  };
  pass();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pass();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(n * sizeof(uint64_t)) / s);
  }
  // Keep the sums observable so the reads cannot be optimised away.
  volatile uint64_t sink = 0;
  for (auto s : sums) sink = sink + s;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace pocket::bench
