// pocket tokenize: text -> token ids (and pieces).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "cli_common.h"
#include "tokenizer/hf_json.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::cli {

namespace {

struct TokenizeOptions {
  std::string model;
  std::string tokenizer;
  std::string text;
  bool ids_only = false;
  bool special = false;
  bool bos = false;
};

// A tokenizer.json (any *.json name, or a folder with only tokenizer files)
// is accepted as well as any model.
std::shared_ptr<const Tokenizer> open_tokenizer(const TokenizeOptions& o) {
  std::string path = o.model.empty() ? default_model_path(POCKET_SHARED_DIR) : o.model;
  std::string json = path;
  if (is_directory(path) && !file_exists(path + "/config.json")) json = path + "/tokenizer.json";
  if (json.size() >= 5 && json.compare(json.size() - 5, 5, ".json") == 0) {  // any name, e.g. a pruned one
    const size_t slash = json.rfind('/');
    std::string dir = slash == std::string::npos ? "" : json.substr(0, slash + 1);
    std::string config = dir + "tokenizer_config.json";
    return Tokenizer::create(vocab_from_hf_json(json, file_exists(config) ? config : "", nullptr));
  }
  OpenOptions oo;
  oo.tokenizer_path = o.tokenizer;
  ModelFile f = open_model(path, oo);
  return Tokenizer::create(f.vocab);
}

int tokenize(const TokenizeOptions& o) {
  auto tok = open_tokenizer(o);
  std::string text = o.text;
  if (text.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), {});
  EncodeOptions eo;
  eo.allow_special = o.special;
  eo.add_bos = o.bos;
  auto ids = tok->encode(text, eo);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  } else {
    for (int32_t id : ids) std::printf("%8d  %s\n", id, display_piece(*tok, id).c_str());
    std::fprintf(stderr, "%zu tokens\n", ids.size());
  }
  return 0;
}

}  // namespace

void add_tokenize(CLI::App& app, int& rc) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print the token ids (and pieces) of a text");
  sub->add_option("-m,--model", o->model, "Model, tokenizer.json, or a folder holding tokenizer.json");
  sub->add_option("--tokenizer", o->tokenizer, "Tokenizer file for llama2.c models");
  sub->add_option("text", o->text, "Text to tokenize (default: read stdin)");
  sub->add_flag("--ids", o->ids_only, "Print ids only, on one line");
  sub->add_flag("--special", o->special, "Match special tokens such as <|im_start|> in the text");
  sub->add_flag("--bos", o->bos, "Prepend the beginning-of-sequence token");
  sub->callback([o, &rc] { rc = tokenize(*o); });
}

}  // namespace pocket::cli
