// pocket: command-line front end of the Pocket runtime.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

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
  pocket::cli::add_quantize(app, rc);
  pocket::cli::add_create(app, rc);
  pocket::cli::add_bench(app, rc);
  pocket::cli::add_eval(app, rc);
  pocket::cli::add_prune_vocab(app, rc);
  pocket::cli::add_convert_draft(app, rc);
  pocket::cli::add_ngram_build(app, rc);
  pocket::cli::add_draft_vocab(app, rc);
  pocket::cli::add_train_head(app, rc);
  pocket::cli::add_classify(app, rc);
  pocket::cli::add_rank(app, rc);
  pocket::cli::add_attach_head(app, rc);
  pocket::cli::add_serve(app, rc);
  if (argc > 1 && argv[1][0] != '-') {  // name the unknown command instead of CLI11's generic message
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == argv[1];
    }
    if (!found) {
      std::fprintf(stderr, "pocket: error: unknown command '%s' (commands: %s)\n", argv[1], known.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const pocket::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pocket: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "pocket: error: out of memory (an allocation failed; try a smaller context with -c, "
                         "fewer threads, or a smaller model)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "pocket: internal error: %s\n", e.what());
    return 1;
  }
  return rc;
}
