// Faults at run time rather than in a file's bytes: the mapped model file
// truncated while in use, a write that fails part way (full disk), memory
// that cannot be had. Each must end in one clear error, never a crash or a
// half-written file under the final name.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/sanitized.h"
#include "common/test_util.h"
#include "core/config.h"
#include "model/kv_cache.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

using test::kSanitized;  // no RLIMIT_AS under sanitizers (terabytes of shadow memory)

void write_bytes(const std::string& path, size_t n, char fill) {
  std::ofstream(path, std::ios::binary) << std::string(n, fill);
}

std::string read_all(const std::string& path) { return read_text_file(path); }

int files_in(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

TEST(MappingGuard, TruncatedWhileMappedIsOneClearErrorNotABusError) {
  test::TempDir dir;
  const std::string path = dir.file("model.gguf");
  write_bytes(path, 1 << 16, 'w');
  auto touch_after_truncate = [&] {
    auto f = MappedFile::open(path);
    ASSERT_EQ(truncate(path.c_str(), 4096), 0);
    volatile uint8_t v = f->data()[40000];  // page beyond the new end: SIGBUS
    (void)v;
    std::fprintf(stderr, "no fault\n");
    _exit(0);
  };
  EXPECT_EXIT(touch_after_truncate(), testing::ExitedWithCode(1),
              "pocket: error: .*model.gguf: the file was truncated or replaced while in use \\(reading byte 40000");
}

TEST(MappingGuard, AFaultOutsideEveryMappingKeepsTheDefaultAction) {
  test::TempDir dir;
  write_bytes(dir.file("a.bin"), 4096, 'a');
  write_bytes(dir.file("b.bin"), 1 << 16, 'b');
  auto f = MappedFile::open(dir.file("a.bin"));  // installs the handler
  // A mapping of the application's own, not registered: its bus error is
  // not Pocket's to explain, and ends the process as it would without Pocket.
  auto fault_elsewhere = [&] {
    int fd = ::open(dir.file("b.bin").c_str(), O_RDONLY);
    auto* p = static_cast<const volatile uint8_t*>(mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE, fd, 0));
    ASSERT_EQ(truncate(dir.file("b.bin").c_str(), 4096), 0);
    (void)p[40000];
    _exit(0);
  };
  if (kSanitized) {
    // The sanitizer's own SIGBUS handler was installed first: it reports the
    // fault and ends the process its way (abort_on_error, exit code 1).
    EXPECT_DEATH(fault_elsewhere(), "BUS");
  } else {
    EXPECT_EXIT(fault_elsewhere(), testing::KilledBySignal(SIGBUS), "");
  }
}

TEST(MappingGuard, PrefaultOfATruncatedFileThrows) {
  test::TempDir dir;
  const std::string path = dir.file("model.gguf");
  write_bytes(path, 1 << 16, 'w');
  auto f = MappedFile::open(path);
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
#ifdef MADV_POPULATE_READ
  try {
    f->prefault();
    // Kernels before 5.14 have no MADV_POPULATE_READ: nothing to check.
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than when it was opened"), std::string::npos) << e.what();
  }
#endif
}

TEST(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  test::TempDir dir;
  const std::string path = dir.file("out.gguf");
  write_bytes(path, 100, 'o');
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::ostream& out) {
                                       out << std::string(5000, 'n');
                                       fail("producer failed half way");
                                     }),
               Error);
  EXPECT_EQ(read_all(path), std::string(100, 'o'));
  EXPECT_EQ(files_in(dir.path()), 1);
  // And a good write replaces it whole.
  write_file_atomically(path, [](std::ostream& out) { out << "new"; });
  EXPECT_EQ(read_all(path), "new");
  EXPECT_EQ(files_in(dir.path()), 1);
}

TEST(AtomicFile, AFullDiskIsAnErrorAndTheOldFileSurvives) {
  test::TempDir dir;
  const std::string path = dir.file("out.gguf");
  write_bytes(path, 100, 'o');
  // RLIMIT_FSIZE makes writes past 64 KiB fail (EFBIG) as a full disk would.
  auto write_too_much = [&] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1 << 16, 1 << 16};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_file_atomically(path, [](std::ostream& out) { out << std::string(1 << 20, 'n'); });
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      _exit(3);
    }
    _exit(0);
  };
  EXPECT_EXIT(write_too_much(), testing::ExitedWithCode(3), "out.gguf: write error");
  EXPECT_EQ(read_all(path), std::string(100, 'o'));
  EXPECT_EQ(files_in(dir.path()), 1);
}

// Sets RLIMIT_AS to what the process maps now plus `headroom` bytes.
void limit_address_space(rlim_t headroom) {
  std::ifstream st("/proc/self/statm");
  long pages = 0;
  st >> pages;
  rlim_t now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
  rlimit lim{now + headroom, now + headroom};
  setrlimit(RLIMIT_AS, &lim);
}

// Whether an address-space limit is enforced here (qemu-user ignores a
// guest's RLIMIT_AS): a child limits itself and tries to map 1 GiB.
bool address_space_limit_works() {
  pid_t pid = fork();
  if (pid == 0) {
    limit_address_space(64 << 20);
    void* p = mmap(nullptr, size_t{1} << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    _exit(p == MAP_FAILED ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(OutOfMemory, AKvCacheThatCannotBeReservedNamesItsSize) {
  if (kSanitized) GTEST_SKIP() << "sanitizer runtimes cannot run under an address-space limit";
  if (!address_space_limit_works()) GTEST_SKIP() << "RLIMIT_AS is not enforced here (e.g. under qemu-user)";
  ModelConfig c;
  c.n_layers = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  // 32 layers x K,V x 8 heads x 4096 positions x 128 x 2 bytes = 512 MiB,
  // under an address-space limit of what the process has now + 64 MiB.
  auto reserve = [&] {
    limit_address_space(64 << 20);
    try {
      KVCache kv(c, 4096);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      _exit(3);
    }
    _exit(0);
  };
  EXPECT_EXIT(reserve(), testing::ExitedWithCode(3), "cannot reserve 512 MiB for the KV cache of 4096 tokens");
}

}  // namespace
}  // namespace pocket
