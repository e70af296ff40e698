// Hugging Face tokenizer files of a pruned vocabulary: the original
// tokenizer.json / tokenizer_config.json with the vocabulary, merges and
// every token id rewritten, everything else (normalizer, pre-tokenizer,
// decoder, chat template, ...) kept as it was.
#pragma once
#include <string>
#include <string_view>

#include "prune/vocab_prune.h"

namespace pocket::prune {

// model.vocab keeps the kept entries with their new ids, model.merges the
// kept merges (same order and spelling), added_tokens and the
// post-processor's special-token ids are remapped. `source` names the
// input in errors.
std::string rewrite_tokenizer_json(std::string_view original, const PrunedVocab& p, const std::string& source);

// added_tokens_decoder re-keyed by the new ids; the rest unchanged.
std::string rewrite_tokenizer_config(std::string_view original, const PrunedVocab& p, const std::string& source);

}  // namespace pocket::prune
