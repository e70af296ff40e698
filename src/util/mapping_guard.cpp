#include "util/mapping_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace pocket {

namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 512;

// Written under `mutex` by register/unregister; read by the signal handler,
// which only loads atomics (a slot is published by storing `end` last and
// retired by clearing `end` first).
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
  char path[kPathBytes] = {};
};
Slot slots[kSlots];
std::mutex mutex;
struct sigaction previous {};

void write_str(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_u64(uint64_t v) {
  char buf[24];
  int i = sizeof(buf) - 1;
  buf[i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 0);
  write_str(buf + i);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : slots) {
    const uintptr_t end = s.end.load(std::memory_order_acquire);
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (end != 0 && addr >= begin && addr < end) {
      write_str("pocket: error: ");
      write_str(s.path);
      write_str(": the file was truncated or replaced while in use (reading byte ");
      write_u64(addr - begin);
      write_str(" failed); reopen it\n");
      _exit(1);
    }
  }
  // Not one of ours: what was installed before decides.
  if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    // The default action, as if no handler had been installed: pending until
    // this handler returns (SIGBUS is blocked inside it), then it ends the
    // process with the usual bus-error status.
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  }
}

void install_once() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous);
}

}  // namespace

int register_mapping(const void* begin, size_t size, const std::string& path) {
  if (begin == nullptr || size == 0) return -1;
  static std::once_flag installed;
  std::call_once(installed, install_once);
  std::lock_guard<std::mutex> lock(mutex);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = slots[i];
    if (s.end.load(std::memory_order_relaxed) != 0) continue;
    size_t n = std::min(path.size(), kPathBytes - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    s.end.store(reinterpret_cast<uintptr_t>(begin) + size, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(mutex);
  slots[slot].end.store(0, std::memory_order_release);
  slots[slot].begin.store(0, std::memory_order_release);
}

}  // namespace pocket
