// fuzz_llama2c: the input is a llama2.c checkpoint and its tokenizer.bin,
// split at the separator line of fuzz_util.h (part 0 = checkpoint, part 1 =
// tokenizer.bin, left out when empty), written side by side and opened with
// open_model(checkpoint) as `pocket run -m model.bin` does: content sniffing
// (looks_like_llama2c), the legacy 7 x int32 header and the v1 "ak42" header,
// shared/separate classifier, weight sizes against the file, the tokenizer
// found beside the model (vocab_from_llama2c: max_token_length, per-token
// score/length/bytes), then exercise_model(). Inputs that start with "GGUF"
// go to the GGUF reader, as with the CLI.
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  static const std::string model = scratch_path("l2c", "model.bin");
  static const std::string tok = scratch_path("l2c", "tokenizer.bin");
  const std::vector<std::string_view> parts = split_parts(data, size, 2);
  write_file(model, parts[0]);
  remove_file(tok);
  if (!parts[1].empty()) write_file(tok, parts[1]);
  guarded([&] { exercise_model(model); });
  return 0;
}
