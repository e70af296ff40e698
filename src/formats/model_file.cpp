// Format autodetection for open_model().
#include "formats/model_file.h"

#include <cstring>

#include "formats/external_vocab.h"
#include "formats/gguf.h"
#include "formats/hf_folder.h"
#include "formats/llama2c.h"
#include "util/error.h"

namespace pocket {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const TensorView& ModelFile::get(const std::string& name) const {
  const TensorView* t = find(name);
  if (!t) fail(path, ": tensor '", name, "' is missing");
  return *t;
}

ModelFile open_model(const std::string& path, const OpenOptions& opts) {
  if (is_directory(path)) return open_hf_folder(path, opts);
  if (!file_exists(path)) fail(path, ": no such file or directory");
  if (ends_with(path, ".safetensors")) {
    std::string dir = parent_dir(path);
    if (!file_exists(join_path(dir, "config.json")))
      fail(path, ": a .safetensors file needs config.json in its folder to be opened as a model");
    ModelFile m = open_hf_folder(dir, opts);
    m.path = path;
    return m;
  }
  // Sniff the first bytes once; the loaders map the file themselves.
  auto mapping = MappedFile::open(path);
  const uint8_t* d = mapping->data();
  const size_t n = mapping->size();
  if (n >= 4 && std::memcmp(d, "GGUF", 4) == 0) return open_gguf(path, opts);
  if (looks_like_llama2c(d, n)) return open_llama2c(path, opts);
  fail(path, ": not a recognised model file (expected GGUF, a Pocket file, a safetensors model folder or a llama2.c "
       "checkpoint)");
}

}  // namespace pocket
