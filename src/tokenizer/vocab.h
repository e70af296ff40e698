// The data that defines a tokenizer, independent of the file it came from.
// Loaders (tokenizer.json, GGUF metadata, llama2.c tokenizer.bin, Pocket's
// compact binary form) fill a Vocab; Tokenizer::create builds the fast
// runtime structures from it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace pocket {

enum class TokenizerKind : uint8_t {
  ByteLevelBPE = 0,   // GPT-2 / Qwen / Llama-3 style: bytes mapped to unicode, BPE merges by rank
  SentencePieceBPE = 1,  // Llama-2 / llama2.c style: merges by score, "▁" for space, <0xNN> byte fallback
};

// Which pre-tokenizer regex a byte-level BPE vocabulary uses. Pocket
// implements each with a hand-written scanner (std::regex is too weak).
enum class PreTokenizer : uint8_t {
  None = 0,
  Qwen2 = 1,   // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Llama3 = 2,  // as Qwen2 but \p{N}{1,3}
  GPT2 = 3,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
};

enum class TokenType : uint8_t {
  Normal = 0,
  Control = 1,      // special tokens such as <|im_start|>, <s>; only matched when the caller allows
  UserDefined = 2,  // added tokens that are not special
  Byte = 3,         // SentencePiece <0xNN> byte-fallback tokens
  Unknown = 4,
  Unused = 5,
};

// SentencePiece pieces spell the space as U+2581 "▁": the text a piece
// stands for, with each U+2581 as ' ' (llama2.c files already use ' ').
std::string sentencepiece_text(const std::string& piece);
// The byte of a byte-fallback piece "<0xNN>", or -1 for any other piece.
int sentencepiece_byte(const std::string& piece);

struct Vocab {
  TokenizerKind kind = TokenizerKind::ByteLevelBPE;
  PreTokenizer pre = PreTokenizer::None;
  bool nfc = false;            // apply Unicode NFC before pre-tokenization
  bool add_space_prefix = false;  // SentencePiece: prepend "▁"/" " to the text
  bool add_bos = false;
  bool ignore_merges = false;  // byte-level BPE (Llama 3): a pre-token that is itself a token is not merged

  std::vector<std::string> tokens;  // id -> piece (byte-level pieces in their unicode-mapped form)
  std::vector<float> scores;        // id -> score (SentencePiece merges); may be empty for BPE
  std::vector<TokenType> types;     // id -> type; same size as tokens
  std::vector<std::pair<std::string, std::string>> merges;  // BPE merges in rank order
  // Optional: (left, right, merged) token ids of each merge, as a loader that
  // resolved them found them. Tokenizer::create checks them against the
  // pieces instead of looking every merge up again, then drops them.
  std::vector<std::array<int32_t, 3>> merge_ids;

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  int32_t unk_id = -1;
  std::vector<int32_t> eos_ids;  // every token that ends generation (eos, <|im_end|>, <|endoftext|>...)
};

}  // namespace pocket
