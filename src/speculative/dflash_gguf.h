// DFlash and DFlash2 drafts in llama.cpp's GGUF form (general.architecture
// "dflash", as its converter writes them from z-lab's folders): the
// dflash.* hyper-parameters become the config.json they came from, and the
// tensors get z-lab's names back, so DFlashDraft checks and runs them
// exactly like a folder. The format differences handled here: target layer
// ids stored 1-based (`dflash.target_layers`: the layer after which the
// state is taken, counting from 1), the mask token in
// tokenizer.ggml.mask_token_id, and the output transforms as
// dflash.logit_scale / dflash.final_logit_softcapping.
#pragma once
#include "formats/gguf.h"
#include "speculative/dflash_file.h"

namespace pocket {

// Fills f.config_json and f.tensors (views into g's mapping) from a GGUF
// whose general.architecture is "dflash". Throws pocket::Error naming the
// file and the key for a missing or unsupported setting, and for tensors a
// Pocket draft cannot use (its own token embedding, output head or d2t
// vocabulary map: Pocket's drafts use the target's).
void read_llama_dflash_gguf(const GgufFile& g, DFlashDraftFile& f);

}  // namespace pocket
