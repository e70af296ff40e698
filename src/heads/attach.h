// Heads inside a Pocket file: a copy of the model file with heads added
// (or replaced, by name) as `head.<name>.*` metadata and tensors.
#pragma once
#include <string>
#include <vector>

#include "heads/head.h"

namespace pocket::heads {

// Writes `out`: every key and tensor of the GGUF/Pocket file `model_path`
// (heads of the same names dropped) plus `heads`. Each head must name the
// model's content hash `model_hash` as its base.
void attach_heads(const std::string& model_path, const std::string& model_hash, const std::vector<Head>& heads,
                  const std::string& out);

}  // namespace pocket::heads
