// pocket convert-draft: a DFlash or DFlash2 draft (z-lab folder or llama.cpp GGUF) into a
// quantized Pocket draft file for `pocket run --dflash FILE`
// (src/speculative/dflash_file.h).
#include <cstdio>
#include <memory>
#include <string>

#include "cli_common.h"
#include "convert/pocket_file.h"
#include "core/dtype.h"
#include "speculative/dflash_file.h"

namespace pocket::cli {

namespace {

struct ConvertDraftArgs {
  std::string in, out, weights = "q8";
  int group = 64;
};

}  // namespace

void add_convert_draft(CLI::App& app, int& rc) {
  auto a = std::make_shared<ConvertDraftArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert-draft",
      "Convert a DFlash or DFlash2 draft (a folder with config.json + model.safetensors, or llama.cpp's GGUF form) "
      "into a quantized Pocket draft file for "
      "pocket run --dflash FILE (a draft model for --draft-model is converted with pocket quantize)");
  sub->add_option("draft", a->in, "The DFlash draft folder or GGUF file")->required();
  sub->add_option("output", a->out, "The Pocket draft file to write (e.g. beside the target: model.dflash.pocket)")
      ->required();
  sub->add_option("--weights", a->weights, "Type of the draft's matrices: q8 (default), q4, f16 or f32 (as pocket quantize)");
  sub->add_option("--group", a->group, "Quantization group size: 32, 64 or 128 (default 64)");
  sub->callback([a, &rc] {
    DFlashConvertOptions o;
    o.weights = convert::parse_weight_type(a->weights, "--weights");
    o.group = convert::parse_group(a->group, "--group");
    const DFlashConvertReport r = convert_dflash_draft(a->in, a->out, o);
    std::printf("%s: %d tensors, %d matrices in %s, %.2f MB -> %.2f MB\n", a->out.c_str(), r.tensors, r.quantized,
                std::string(dtype_name(o.weights)).c_str(), r.bytes_in / 1e6, r.bytes_out / 1e6);
    if (r.draft_vocab > 0) std::printf("  with the draft vocabulary ranking (%d token ids)\n", r.draft_vocab);
    rc = 0;
  });
}

}  // namespace pocket::cli
