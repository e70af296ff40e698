#include "interrupt.h"

#include <signal.h>

namespace pocket::cli {

namespace {

std::atomic<bool> flag{false};

void on_sigint(int) {
  flag.store(true, std::memory_order_relaxed);
  signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read waiting for the next chat turn returns
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return flag.load(std::memory_order_relaxed); }
const std::atomic<bool>& interrupt_flag() { return flag; }

}  // namespace pocket::cli
