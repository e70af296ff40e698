// Runs the pocket CLI as a user does: stdout and stderr together, the exit
// code (128 + signal when it died of one).
#pragma once
#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>

#include "common/test_util.h"

namespace pocket::test {

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

inline Result run(const std::string& args, const std::string& stdin_text = "") {
  TempDir dir;
  std::string in = dir.file("stdin.txt");
  std::ofstream(in) << stdin_text;
  std::string cmd = cli_command() + " " + args + " < " + in + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace pocket::test
