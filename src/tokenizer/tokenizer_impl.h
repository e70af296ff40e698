// Internal state of a Tokenizer, shared by its translation units
// (tokenizer.cpp: build/encode/decode, bpe.cpp: merge loops,
// serialize.cpp: binary form, stream_decoder.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/hash_tables.h"
#include "tokenizer/tokenizer.h"

namespace pocket {

struct Tokenizer::Impl {
  Vocab vocab;
  std::vector<std::string> bytes;         // id -> raw bytes (what decode emits)
  tok_detail::StringIdMap piece_ids;      // vocab.tokens -> id (token_id)
  tok_detail::StringIdMap text_ids;       // raw bytes -> id of tokens that text may become
  tok_detail::PairMap merges;             // byte-level: (left, right) -> (rank, merged)
  std::vector<tok_detail::PairMap::Value> byte_pairs;  // byte-level: merges of two raw bytes, [left << 8 | right]
  std::array<int32_t, 256> byte_ids{};    // byte-level: single-byte symbols; SentencePiece: <0xNN>; -1 if none

  struct Special {
    std::string text;
    int32_t id;
    bool control;  // matched only with allow_special; user-defined added tokens always match (as in HF)
  };
  std::array<std::vector<Special>, 256> specials_by_first_byte;  // longest first
  bool has_specials = false;
  bool has_user_defined = false;

  // Builds everything above from `vocab`; throws pocket::Error if it is
  // invalid. vocab.merge_ids (left, right, merged ids per merge, from the
  // binary form or tokenizer.json's validation) spares the string lookups;
  // they are verified, not trusted.
  void build();
  std::vector<std::array<int32_t, 3>> merge_ids;  // byte-level: (left, right, merged) per rank

  // Encodes text that contains no special tokens to match.
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  // Byte-level BPE of one pre-token; SentencePiece BPE of one segment.
  // Words of up to kShortWord bytes are merged in `scratch` with a linear
  // scan, longer ones with a heap (O(n log n) for adversarial input).
  static constexpr size_t kShortWord = 64;
  static constexpr int32_t kNoMerge = INT32_MAX;
  struct BpeScratch {
    struct Sym {
      int32_t id;
      int32_t rank;    // rank of the merge of this symbol with the next; kNoMerge if none
      int32_t merged;  // the id that merge gives
      int32_t byte;    // the raw byte while the symbol is one, else -1
    };
    Sym syms[kShortWord];
  };
  void bpe_byte_level(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;
  void bpe_byte_level_heap(std::string_view word, std::vector<int32_t>& out) const;
  void bpe_sentencepiece(std::string_view text, std::vector<int32_t>& out) const;
  // Does decode drop the leading space of token `k` of a sequence whose
  // previous token is `prev` (-1 at the start)?
  bool strips_leading_space(int32_t id, int32_t prev) const;
};

}  // namespace pocket
