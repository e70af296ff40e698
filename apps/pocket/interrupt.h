// Ctrl-C (SIGINT) for the commands that run for a while (run, chat, bench):
// the first one asks the running command to stop at the next token or run,
// print what it has (partial statistics) and exit with code 130; a second
// one ends the process at once.
#pragma once
#include <atomic>

namespace pocket::cli {

// The exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells use).
inline constexpr int kInterruptedExit = 130;

void install_interrupt_handler();
bool interrupted();
const std::atomic<bool>& interrupt_flag();

}  // namespace pocket::cli
