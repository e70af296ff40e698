// pocket attach-head: stores trained heads inside a copy of their Pocket file.
#include <cstdio>
#include <memory>

#include "heads/attach.h"
#include "heads/head_file.h"
#include "heads_cli.h"
#include "util/error.h"

namespace pocket::cli {

void add_attach_head(CLI::App& app, int& rc) {
  struct Args {
    ModelOptions model;
    std::vector<std::string> heads;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("attach-head", "Store decision heads inside a copy of their base model's Pocket file");
  a->model.add_to(*sub);
  sub->add_option("--head", a->heads, "Head file (repeatable); a head of the same name in the model is replaced")->required();
  sub->add_option("-o,--output", a->out, "Pocket file to write")->required();
  sub->callback([a, &rc] {
    std::string path;
    LoadedModel m = a->model.load(&path);
    if (m.file->format != "gguf" && m.file->format != "pocket")
      fail(path, ": heads can be attached to Pocket (or GGUF) files; convert it with `pocket quantize` first");
    std::vector<heads::Head> hs;
    for (const std::string& h : a->heads) hs.push_back(heads::load_head(h));
    heads::attach_heads(path, content_hash(m, a->model.resolve_threads()), hs, a->out);
    std::printf("wrote %s with %zu head(s)\n", a->out.c_str(), hs.size());
    rc = 0;
  });
}

}  // namespace pocket::cli
