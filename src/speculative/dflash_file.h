// The Pocket form of a DFlash draft: one GGUF file (pocket.version set)
// holding the draft's tensors under z-lab's names, the matrices quantized
// (PQ8, PQ4, F16 or F32), the norms in f32, and config.json verbatim in
// `pocket.dflash.config`. A file of its own beside the target's rather than
// extra tensors inside it: the target stays byte-identical (its content
// hash, attached heads and saved sessions keep working), a draft can be
// swapped or dropped without rewriting hundreds of MB, and one draft file
// serves every quantization of the same target. `pocket convert-draft`
// writes it; DFlashDraft reads either form.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/tensor.h"
#include "speculative/draft_vocab.h"
#include "util/mapped_file.h"

namespace pocket {

// Key holding the draft's config.json text.
inline constexpr const char* kDFlashConfigKey = "pocket.dflash.config";

struct DFlashConvertOptions {
  DType weights = DType::PQ8;  // type of the 2-D matrices (PQ8, PQ4, F16 or F32)
  int group = 64;              // PQ group size (32, 64 or 128)
};

struct DFlashConvertReport {
  int tensors = 0, quantized = 0;  // tensors written; of those, matrices in `weights`
  int draft_vocab = 0;             // ids of the draft vocabulary ranking carried over (0: none)
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data read and written
};

// Reads DIR/config.json and DIR/model.safetensors (or a draft file: a
// llama.cpp DFlash GGUF, or a Pocket draft file to quantize again) and
// writes the Pocket draft file `out` (via a temporary name). Throws pocket::Error naming the
// problem (a missing file, invalid JSON, a non-finite weight...).
DFlashConvertReport convert_dflash_draft(const std::string& dir, const std::string& out,
                                         const DFlashConvertOptions& opt);

// A Pocket draft file opened: config.json text and tensor views into the
// mapping (kept alive here). A GGUF in llama.cpp's dflash.* form
// (speculative/dflash_gguf.h) opens too, as the folder it was made from.
struct DFlashDraftFile {
  std::string config_json;
  std::map<std::string, TensorView> tensors;
  std::shared_ptr<const MappedFile> mapping;
  std::optional<DraftVocab> draft_vocab;  // when the file carries a ranking (checked)
};
DFlashDraftFile open_dflash_draft_file(const std::string& path);

}  // namespace pocket
