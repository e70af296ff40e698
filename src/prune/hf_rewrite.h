// Hugging Face tokenizer files of a pruned vocabulary: the original
// tokenizer.json / tokenizer_config.json with the vocabulary, merges and
// every token id rewritten, everything else (normalizer, pre-tokenizer,
// decoder, chat template, ...) kept as it was.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "prune/vocab_prune.h"

namespace pocket::prune {

// model.vocab keeps the kept entries with their new ids, model.merges the
// kept merges (same order and spelling), added_tokens and the
// post-processor's special-token ids are remapped. `source` names the
// input in errors.
std::string rewrite_tokenizer_json(std::string_view original, const PrunedVocab& p, const std::string& source);

// added_tokens_decoder re-keyed by the new ids; the rest unchanged.
std::string rewrite_tokenizer_config(std::string_view original, const PrunedVocab& p, const std::string& source);

// The other tokenizer files of a folder: special_tokens_map.json (no ids:
// copied) and added_tokens.json (text -> id: remapped), written to out_dir.
// Returns the names written; `not_carried` gets the old vocabulary's
// slow-tokenizer files (vocab.json, merges.txt), which are left out.
std::vector<std::string> rewrite_tokenizer_side_files(const std::string& in_dir, const std::string& out_dir,
                                                      const PrunedVocab& p, std::vector<std::string>& not_carried);

}  // namespace pocket::prune
