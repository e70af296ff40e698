// pocket: command-line front end of the Pocket runtime.
#include <cstdio>
#include <exception>

#include "cli_common.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Pocket: a small, fast runtime for app-native language models", "pocket"};
  app.set_version_flag("--version", POCKET_VERSION);
  app.require_subcommand(1);
  int rc = 0;
  pocket::cli::add_run(app, rc);
  pocket::cli::add_chat(app, rc);
  pocket::cli::add_info(app, rc);
  pocket::cli::add_tokenize(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const pocket::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pocket: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pocket: internal error: %s\n", e.what());
    return 1;
  }
  return rc;
}
