// fuzz_hf_folder: the input is a whole Hugging Face model folder, split into
// parts at the separator line of fuzz_util.h:
//   0 config.json   1 model.safetensors.index.json   2 first weights file
//   3 second shard  4 tokenizer.json                 5 tokenizer_config.json
// An empty part 1 means no index: part 2 is then model.safetensors; with an
// index, parts 2 and 3 are model-00001-of-00002.safetensors and
// model-00002-of-00002.safetensors (what the index seeds name). Empty parts 4
// and 5 leave those files out. The folder is opened with open_model(dir) as
// `pocket info DIR` / `pocket run -m DIR` do: config.json fields, the sharded
// index (weight_map, shard names), each safetensors header, canonical names,
// the tokenizer files, then exercise_model().
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  static const std::string dir = [] {
    std::string p = scratch_path("hf", "x");
    return p.substr(0, p.size() - 2);
  }();
  const std::vector<std::string_view> parts = split_parts(data, size, 6);
  const bool sharded = !parts[1].empty();
  const char* files[] = {"config.json", "model.safetensors.index.json", "model.safetensors",
                         "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                         "tokenizer.json", "tokenizer_config.json"};
  for (const char* f : files) remove_file(dir + "/" + f);
  write_file(dir + "/config.json", parts[0]);
  if (sharded) {
    write_file(dir + "/model.safetensors.index.json", parts[1]);
    write_file(dir + "/model-00001-of-00002.safetensors", parts[2]);
    write_file(dir + "/model-00002-of-00002.safetensors", parts[3]);
  } else {
    write_file(dir + "/model.safetensors", parts[2]);
  }
  if (!parts[4].empty()) write_file(dir + "/tokenizer.json", parts[4]);
  if (!parts[5].empty()) write_file(dir + "/tokenizer_config.json", parts[5]);
  guarded([&] { exercise_model(dir); });
  return 0;
}
