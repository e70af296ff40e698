// fuzz_gguf: the input is one model file, written to the scratch directory
// and opened with open_model() exactly as `pocket info` / `pocket run -m`
// do. open_model dispatches on content, so this reaches the GGUF container
// parser (header, typed metadata incl. nested arrays, tensor-info table,
// alignment and data bounds), the model-level GGUF reading (config keys,
// tokenizer.ggml.* vocabularies, K-quant and PQ tensor types) and Pocket's own
// extensions (pocket.version, pocket.quant.group_size, the pocket.tokenizer
// binary blob, PQ4/PQ8 tile layouts); inputs that look like a llama2.c header
// reach that reader too. Then exercise_model(): tokenizer build, chat-format
// detection, encode/decode and Model construction.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  static const std::string path = scratch_path("gguf", "model.gguf");
  write_file(path, data, size);
  guarded([&] { exercise_model(path); });
  return 0;
}
