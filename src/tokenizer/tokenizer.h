// Pocket's tokenizer: byte-level BPE (Qwen2/Qwen3, Llama 3, GPT-2) and
// SentencePiece-style BPE (Llama 2, llama2.c), built from a Vocab.
//
// Input text contract:
//  * Control tokens (added tokens marked special, e.g. "<|im_start|>") are
//    matched in the text only when EncodeOptions::allow_special is set
//    (Hugging Face's default matches them; that is unsafe for untrusted
//    text). Otherwise their text is tokenized like any other text, as Hugging
//    Face does with encode_special_tokens. User-defined added tokens (not
//    special, e.g. Qwen3's "<tool_call>") are always matched, in both modes,
//    as Hugging Face and llama.cpp do. The text is split at matched added
//    tokens first and each part is normalized (NFC) on its own, as Hugging
//    Face does, so a combining mark never composes with an added token's
//    last character.
//  * Invalid UTF-8: every byte that is not part of a well-formed UTF-8
//    sequence is treated as one code point of its own that belongs to no
//    Unicode category (like a symbol) and is never changed by NFC. Byte-level
//    vocabularies then encode it as its raw byte, so decode(encode(s)) == s
//    holds for any byte string. SentencePiece vocabularies use byte fallback
//    (<0xNN>) or unk. (Hugging Face cannot take such input at all: its strings
//    are valid Unicode.)
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pocket {

struct EncodeOptions {
  bool allow_special = false;  // also match control (special) tokens in the text
  bool add_bos = false;        // prepend vocab.bos_id (if the vocab has one)
};

class Tokenizer {
 public:
  // Validates the vocab and builds the runtime structures; throws a clear
  // pocket::Error on a bad vocab.
  static std::shared_ptr<const Tokenizer> create(Vocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opt = {}) const;

  // Full decode. Byte-level: the raw bytes of every token. SentencePiece:
  // "▁" -> space, <0xNN> -> byte, and one leading space stripped from the
  // first piece after BOS (or at the start) like Hugging Face's decoder.
  // Ids out of range throw pocket::Error.
  std::string decode(std::span<const int32_t> ids) const;

  // Raw bytes of one token (for streaming and stop strings); control tokens
  // give their text. Out-of-range ids throw pocket::Error.
  std::string token_bytes(int32_t id) const;

  int32_t vocab_size() const;
  const Vocab& vocab() const;
  std::optional<int32_t> token_id(std::string_view piece) const;  // exact piece lookup
  bool is_eos(int32_t id) const;
  bool is_control(int32_t id) const;

  // Pocket's compact binary form (magic "PKTK"), and its bounds-checked reader.
  std::vector<uint8_t> serialize() const;
  static std::shared_ptr<const Tokenizer> deserialize(const uint8_t* data, size_t size);

  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Printable form of one token for `pocket tokenize`: its bytes as UTF-8 text,
// with control characters, backslash and invalid/partial UTF-8 bytes escaped
// as \n, \t, \r, \\, \xNN. Control tokens print as their text.
std::string display_piece(const Tokenizer& tok, int32_t id);

// Streaming decoder: feed ids one at a time, get only complete UTF-8 out.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok);
  // Bytes of `id` appended to the pending bytes; returns the longest prefix
  // that is complete UTF-8 (invalid bytes are emitted as U+FFFD as soon as
  // they are known to be invalid).
  std::string push(int32_t id);
  // Emits the leftover bytes (an incomplete sequence) as U+FFFD and resets.
  std::string flush();
  // Decodes as a continuation after token `prev` (a SentencePiece leading
  // space is kept unless prev is BOS or negative), for output that must
  // match the tokens' bytes exactly.
  void continue_after(int32_t prev) { prev_ = prev; }

 private:
  const Tokenizer& tok_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
  int32_t prev_ = -1;    // previous id (SentencePiece strips the space after BOS)
};

}  // namespace pocket
