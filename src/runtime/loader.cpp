#include "runtime/loader.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

LoadedModel load_model(const std::string& path, const OpenOptions& opts, const std::function<bool(float)>& progress) {
  auto report = [&](double fraction) {
    if (progress && !progress(static_cast<float>(fraction)))
      fail_as(ErrorCode::Cancelled, path, ": loading was cancelled by the progress callback");
  };
  // The share of the progress bar each step gets: reading the headers and
  // tokenizer, reading the weights in (by bytes), building the model.
  constexpr double kParsed = 0.1, kRead = 0.9;
  report(0);
  LoadedModel m;
  auto file = std::make_shared<ModelFile>(open_model(path, opts));
  if (!file->has_vocab) fail(path, ": the model has no tokenizer");
  m.tokenizer = file->tokenizer ? file->tokenizer : Tokenizer::create(file->vocab);
  report(kParsed);
  // The weights are about to be used: map every page now, in slices when
  // someone is watching the progress.
  size_t total = 0, done = 0;
  for (const auto& mapping : file->mappings) total += mapping->size();
  constexpr size_t kSlice = size_t{32} << 20;
  for (const auto& mapping : file->mappings) {
    const size_t step = progress ? kSlice : mapping->size();
    for (size_t at = 0; at < mapping->size(); at += step) {
      const size_t n = std::min(step, mapping->size() - at);
      mapping->prefault(at, n);
      done += n;
      report(kParsed + (kRead - kParsed) * static_cast<double>(done) / static_cast<double>(total));
    }
  }
  m.file = file;
  m.model = std::make_shared<Model>(m.file, opts.exact_kquants);
  m.chat_format = detect_chat_format(file->chat_template, *m.tokenizer, &m.chat_template_recognised);
  report(1);
  return m;
}

int resolve_threads(int requested) {
  if (requested < 0) fail_as(ErrorCode::InvalidArgument, "thread count ", requested, " must be >= 0 (0 = all cores)");
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int resolve_context(int requested, const ModelConfig& cfg) {
  if (requested < 0 || requested > cfg.max_seq_len)
    fail_as(ErrorCode::InvalidArgument, "context size ", requested, " is outside [1, ", cfg.max_seq_len, "] (the model's context length)");
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
