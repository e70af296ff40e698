#include "runtime/loader.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

LoadedModel load_model(const std::string& path, const OpenOptions& opts) {
  LoadedModel m;
  auto file = std::make_shared<ModelFile>(open_model(path, opts));
  if (!file->has_vocab) fail(path, ": the model has no tokenizer");
  m.tokenizer = file->tokenizer ? file->tokenizer : Tokenizer::create(file->vocab);
  for (const auto& mapping : file->mappings) mapping->prefault();  // the weights are about to be used
  m.file = file;
  m.model = std::make_shared<Model>(m.file);
  m.chat_format = detect_chat_format(file->chat_template, *m.tokenizer, &m.chat_template_recognised);
  return m;
}

int resolve_threads(int requested) {
  if (requested < 0) fail("thread count ", requested, " must be >= 0 (0 = all cores)");
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int resolve_context(int requested, const ModelConfig& cfg) {
  if (requested < 0 || requested > cfg.max_seq_len)
    fail("context size ", requested, " is outside [1, ", cfg.max_seq_len, "] (the model's context length)");
  return requested > 0 ? requested : std::min(cfg.max_seq_len, 4096);
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
