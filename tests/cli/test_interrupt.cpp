// Ctrl-C during the long-running commands: the first SIGINT stops the
// command at the next token or run, which prints what it has and exits with
// code 130, never a crash or a lost report.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/test_util.h"

namespace {

// A child running `sh -c "exec CMD"` with stdin, stdout and stderr on pipes.
class Child {
 public:
  explicit Child(const std::string& cmd) {
    int in[2], out[2], err[2];
    if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    stderr_ = err[0];
  }
  ~Child() {
    close_stdin();
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_ >= 0) close(stdout_);
    if (stderr_ >= 0) close(stderr_);
  }
  bool started() const { return pid_ > 0; }
  void write_stdin(const std::string& s) { (void)!::write(stdin_, s.data(), s.size()); }
  void close_stdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  void interrupt() { kill(pid_, SIGINT); }

  // Reads both pipes until `needle` shows up in stdout (or stderr when
  // `in_stderr`), the child closes them, or `seconds` pass.
  bool wait_for(const std::string& needle, bool in_stderr, double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const std::string& hay = in_stderr ? err : out;
      if (hay.find(needle) != std::string::npos) return true;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !pump(static_cast<int>(left.count()))) return hay.find(needle) != std::string::npos;
    }
  }
  // Reads to the end and returns the exit code (minus the signal number if
  // killed, so dying of SIGINT is not mistaken for exiting with 130);
  // if the child has not exited after `seconds`, its stdin is closed first.
  int finish(double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (pump(200))
      if (std::chrono::steady_clock::now() > until) close_stdin();
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::string out, err;

 private:
  // One poll of both pipes; false once both are closed.
  bool pump(int timeout_ms) {
    pollfd fds[2] = {{stdout_, POLLIN, 0}, {stderr_, POLLIN, 0}};
    int open_fds = (stdout_ >= 0) + (stderr_ >= 0);
    if (open_fds == 0) return false;
    if (poll(fds, 2, timeout_ms) <= 0) return true;
    int* fd[2] = {&stdout_, &stderr_};
    std::string* dst[2] = {&out, &err};
    for (int i = 0; i < 2; ++i) {
      if (*fd[i] < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = read(*fd[i], buf, sizeof buf);
      if (n > 0) {
        dst[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(*fd[i]);
        *fd[i] = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  bool reaped_ = false;
};

const std::string cli() { return pocket::test::cli_command(); }

TEST(Interrupt, RunStopsAtTheNextTokenAndPrintsItsStatistics) {
  const std::string cmd = cli() + " run -m " + pocket::test::stories_model() + " -n 400 --ignore-eos --temp 0";
  // Generation is fast: the signal can land after the last token. Each try
  // that was interrupted must behave; at least one of five must be.
  int interrupted_runs = 0;
  for (int attempt = 0; attempt < 5 && interrupted_runs == 0; ++attempt) {
    Child c(cmd);
    ASSERT_TRUE(c.started());
    ASSERT_TRUE(c.wait_for("Once upon a time", false, 120)) << c.out << c.err;
    c.interrupt();
    int code = c.finish(120);
    if (code == 0) continue;  // finished before the signal arrived
    ++interrupted_runs;
    EXPECT_EQ(code, 130) << c.err;
    EXPECT_NE(c.err.find("stop: interrupted]"), std::string::npos) << c.err;
    EXPECT_NE(c.err.find("[prompt "), std::string::npos) << c.err;
    EXPECT_EQ(c.err.find("error"), std::string::npos) << c.err;
  }
  EXPECT_GT(interrupted_runs, 0) << "no try was interrupted before it finished";
}

TEST(Interrupt, ChatWaitingForInputExitsCleanly) {
  Child c(cli() + " chat -m " + pocket::test::stories_model() + " -n 8 --temp 0");
  ASSERT_TRUE(c.started());
  c.write_stdin("Once upon a time\n");
  // The turn's statistics line means the reply is done and chat is reading
  // the next line (or about to: finish() closes stdin if the signal came
  // before the read, which must then end the same way).
  ASSERT_TRUE(c.wait_for(" generated, ", true, 120)) << c.err;
  c.interrupt();
  EXPECT_EQ(c.finish(10), 130) << c.err;
  EXPECT_NE(c.err.find("pocket: interrupted"), std::string::npos) << c.err;
}

TEST(Interrupt, BenchReportsTheRunsFinishedSoFar) {
  pocket::test::TempDir dir;
  const std::string model = dir.file("tiny.pocket");
  ASSERT_EQ(std::system((cli() + " create --preset tiny-qwen3 -o " + model + " > /dev/null 2>&1").c_str()), 0);
  Child c(cli() + " bench -m " + model + " -p 64 -n 16 -t 1 --runs 1000000 --bandwidth-bytes 16777216");
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(c.wait_for("run 2/1000000:", true, 120)) << c.err;
  c.interrupt();
  EXPECT_EQ(c.finish(60), 130) << c.err;
  EXPECT_NE(c.out.find(" of 1000000 runs (interrupted)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("decode 16 tokens"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("not measured (interrupted)"), std::string::npos) << c.out;
}

}  // namespace
