#include "runtime/loader.h"

#include <cstdlib>

#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

LoadedModel load_model(const std::string& path, const OpenOptions& opts) {
  LoadedModel m;
  auto file = std::make_shared<ModelFile>(open_model(path, opts));
  if (!file->has_vocab) fail(path, ": the model has no tokenizer");
  m.tokenizer = Tokenizer::create(file->vocab);
  for (const auto& mapping : file->mappings) mapping->prefault();  // the weights are about to be used
  m.file = file;
  m.model = std::make_shared<Model>(m.file);
  m.chat_format = detect_chat_format(file->chat_template, *m.tokenizer, &m.chat_template_recognised);
  return m;
}

std::string default_model_path(const std::string& shared_dir) {
  if (const char* env = std::getenv("POCKET_MODEL"); env && *env) return env;
  for (const std::string& dir : {shared_dir, std::string("../shared"), std::string("shared")}) {
    std::string p = dir + "/models/stories260K.bin";
    if (file_exists(p)) return p;
  }
  fail("no model given: pass -m MODEL or set POCKET_MODEL (the default, ", shared_dir,
       "/models/stories260K.bin, was not found)");
}

}  // namespace pocket
