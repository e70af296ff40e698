// Vocabulary pruning of byte-level and SentencePiece BPE tokenizers (`pocket prune-vocab`):
// which tokens a smaller vocabulary keeps, and the pruned Vocab with its
// old -> new id map. This file owns the selection rules; reading corpora
// (corpus_stats.h), rewriting tokenizer files (hf_rewrite.h) and model
// files (prune_model.h) build on it.
//
// Why the pruned tokenizer encodes kept-only text identically: BPE merges
// the pair of lowest rank first, so the tokens a word ends with are each
// the result of running BPE on that token's own bytes (merges never cross a
// final token's edges, and merges inside it do not depend on what is
// outside). So every token has one canonical derivation, whose last merge
// joins its two "parents". A kept set closed under parents, with every merge
// whose two parts and result are kept (in the original order), applies the
// same merges in the same order to any word whose original tokens are all
// kept: the lowest-ranked applicable merge of the full table is applied
// there, and it is also in the pruned table.
//
// SentencePiece BPE (Gemma, Llama 2; byte fallback) has no merge list: two
// adjacent symbols merge when their concatenated text is a token, highest
// score first, ties leftmost. The same argument holds with "merge" read as
// "the token a merge makes": the merges inside a final token's span are
// those of the algorithm run on that token's text alone, so each token's
// parents are the two symbols of the last merge of that run (a symbol that
// is not a token, a single character the vocabulary lacks, needs nothing
// kept). A pruned vocabulary has a subset of the merges (a merge exists
// exactly when its result is kept), so on text whose original tokens are all
// kept the original run's merge is still the best one left at every step.
// Characters without a kept token fall back to the 256 <0xNN> byte tokens,
// which are always kept, so every string still encodes and decodes back.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace pocket::prune {

// Canonical BPE parents of every token: (left, right) ids of the last merge
// that BPE applies to the token's own bytes (SentencePiece: its own text,
// U+2581 read as a space), or {-1, -1} for byte tokens, added tokens and
// tokens BPE never produces from their bytes; SentencePiece: -1 for a side
// that is a character without a token.
std::vector<std::array<int32_t, 2>> bpe_parents(const Vocab& v);

// The 256 single-byte tokens (SentencePiece: the <0xNN> byte-fallback
// tokens), indexed by byte. Throws pocket::Error if the vocabulary is not
// BPE or lacks one of them.
std::array<int32_t, 256> byte_tokens(const Vocab& v);

struct SelectOptions {
  int64_t keep = 0;                // total tokens to keep (all kinds)
  uint64_t min_count = 0;          // tokens seen fewer times are kept only as mandatory or ancestors
  std::vector<int32_t> must_keep;  // --keep-tokens, chat-template tokens, ...
};

struct Selection {
  std::vector<uint8_t> kept;  // per old id
  int64_t mandatory = 0;      // byte + added + must-keep tokens with their ancestors
  int64_t from_counts = 0;    // tokens chosen by count (with their ancestors)
  int64_t total = 0;
};

// Byte tokens, every non-normal token (special / added) and `must_keep`,
// closed under parents; then tokens by descending count (ties: lower id),
// each only together with its missing ancestors and only if all of them
// fit. Tokens never seen (count 0, when min_count is 0) fill what is left
// in id order. Throws if keep is smaller than the mandatory set.
Selection select_tokens(const Vocab& v, const std::vector<std::array<int32_t, 2>>& parents,
                        const std::vector<uint64_t>& counts, const SelectOptions& opt);

struct PrunedVocab {
  Vocab vocab;                        // ids renumbered densely in the original order
  std::vector<int32_t> old_to_new;    // -1 where dropped
  std::vector<int32_t> new_to_old;
  std::vector<uint8_t> merge_kept;    // per original merge rank
};

// Applies a selection: keeps every merge whose two parts and result are
// kept, in the original order, and remaps bos/eos/pad/unk ids.
PrunedVocab apply_selection(const Vocab& v, const std::vector<uint8_t>& kept);

// The id map as a JSON document: old/new sizes, new_to_old and old_to_new.
std::string id_map_json(const PrunedVocab& p);

}  // namespace pocket::prune
