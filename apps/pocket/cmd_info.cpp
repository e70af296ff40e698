// pocket info: what a model file holds.
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "kernels/kernels.h"

namespace pocket::cli {

namespace {

int info(const std::string& path, const std::string& tokenizer) {
  OpenOptions o;
  o.tokenizer_path = tokenizer;
  o.require_vocab = false;
  ModelFile f = open_model(path, o);
  std::printf("%-22s %s\n", "file", f.path.c_str());
  for (const auto& [key, value] : f.info) std::printf("%-22s %s\n", key.c_str(), value.c_str());
  for (const std::string& n : f.notes) std::printf("%-22s %s\n", "note", n.c_str());
  if (f.has_vocab) {
    auto tok = Tokenizer::create(f.vocab);
    bool known = true;
    ChatFormat cf = detect_chat_format(f.chat_template, *tok, &known);
    std::printf("%-22s %s%s\n", "chat template", chat_format_name(cf), known ? "" : " (fallback: template not recognised)");
  }
  std::printf("%-22s %s\n", "kernels", kernels::active_isa());
  return 0;
}

}  // namespace

void add_info(CLI::App& app, int& rc) {
  auto path = std::make_shared<std::string>();
  auto tok = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("info", "Print a model's architecture, shapes, parameter count and tensor types");
  sub->add_option("model", *path, "Model file or folder")->required();
  sub->add_option("--tokenizer", *tok, "Tokenizer file (llama2.c tokenizer.bin or tokenizer.json)");
  sub->callback([path, tok, &rc] { rc = info(*path, *tok); });
}

}  // namespace pocket::cli
