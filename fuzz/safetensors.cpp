// fuzz_safetensors: the input is one model.safetensors file, placed in a
// folder with a fixed, valid config.json for a tiny Llama (dim 32, 1 layer,
// vocab 272) and no tokenizer, and opened as `pocket info x/model.safetensors`
// does: open_model() on the .safetensors path -> open_hf_folder() ->
// SafetensorsFile::open (u64 header length, JSON header, dtypes, shapes,
// data_offsets against the file size, __metadata__), canonical tensor names,
// shape checks against config.json, then Model construction.
#include "fuzz_util.h"

namespace {
const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
 "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
 "vocab_size": 272, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": true, "torch_dtype": "float32"})";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  static const std::string path = [] {
    write_file(scratch_path("st", "config.json"), kConfig);
    return scratch_path("st", "model.safetensors");
  }();
  write_file(path, data, size);
  guarded([&] { exercise_model(path); });
  return 0;
}
