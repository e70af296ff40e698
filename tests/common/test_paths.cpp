// The checkout's paths for the test suite (see test_util.h): the only test
// source that CMake compiles with them.
#include "common/test_util.h"

namespace pocket::test {

std::string shared_dir() { return POCKET_SHARED_DIR; }
std::string test_data_dir() { return POCKET_TEST_DATA; }
// POCKET_TEST_CLI replaces the built-in command, e.g. to run the CLI under the
// same emulator as the test executable (scripts/test.sh, stage no-avx512).
std::string cli_command() {
  const char* env = std::getenv("POCKET_TEST_CLI");
  return env != nullptr && *env != '\0' ? env : POCKET_CLI_PATH;
}

}  // namespace pocket::test
