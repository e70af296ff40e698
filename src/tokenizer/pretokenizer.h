// Pre-tokenization: splits text into the pieces the byte-level BPE encodes
// one by one. Each supported Hugging Face regex is a hand-written scanner
// over code points that follows the regex's leftmost-first alternation and
// greedy/backtracking semantics exactly (std::regex cannot express \p{L}).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pocket {

// The regex that Hugging Face tokenizer.json files spell for `kind`.
std::string_view pretokenizer_regex(PreTokenizer kind);
// Which supported pre-tokenizer a regex string is (exact match), if any.
std::optional<PreTokenizer> pretokenizer_from_regex(std::string_view regex);

// Appends to `ends` the end offset (in bytes) of each piece of `text`, in
// order; piece k spans [ends[k-1], ends[k]) (the first starts at 0).
// PreTokenizer::None yields the whole text as one piece. Invalid UTF-8 bytes
// count as characters of no category (see tokenizer/unicode.h).
void pretokenize(PreTokenizer kind, std::string_view text, std::vector<uint32_t>& ends);

}  // namespace pocket
