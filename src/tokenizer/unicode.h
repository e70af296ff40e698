// Unicode helpers for the tokenizers: UTF-8 decoding that tolerates invalid
// bytes, the character classes the pre-tokenizer regexes need, and NFC.
//
// Invalid UTF-8: each byte that is not part of a well-formed sequence decodes
// to its own pseudo code point kInvalidBase + byte. Pseudo code points are in
// no category (class Other), have combining class 0, never compose, and
// encode back to the original byte, so every transformation here is lossless
// on arbitrary bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/unicode_data.h"

namespace pocket::unicode {

constexpr uint32_t kInvalidBase = 0x110000;

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

inline uint8_t property(uint32_t cp) {
  if (cp >= 0x110000) return kOther;
  return tables::kPropStage2[tables::kPropStage1[cp >> 7] * 128u + (cp & 127u)];
}
inline CharClass char_class(uint32_t cp) { return static_cast<CharClass>(property(cp) & 3); }
inline bool nfc_may_change(uint32_t cp) { return (property(cp) & 4) != 0; }

// Decodes one code point at s[i] (i < s.size()); sets `len` to the bytes used
// (1 for an invalid byte, whose result is kInvalidBase + byte).
inline uint32_t decode(std::string_view s, size_t i, size_t& len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  const unsigned c = p[0];
  len = 1;
  if (c < 0x80) return c;
  auto cont = [&](size_t k) { return k < left && (p[k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF && cont(1)) {
    len = 2;
    return ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
  }
  if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
    uint32_t cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {  // no overlongs, no surrogates
      len = 3;
      return cp;
    }
  } else if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    uint32_t cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    if (cp >= 0x10000 && cp < 0x110000) {
      len = 4;
      return cp;
    }
  }
  return kInvalidBase + c;
}

// Appends the UTF-8 form of cp (a pseudo code point appends its raw byte).
void append_utf8(std::string& out, uint32_t cp);

// Length of the longest prefix of s that is complete, valid UTF-8, plus how
// many bytes after it are the start of a valid but incomplete sequence
// (0 if the next byte is invalid). Used by streaming decoders.
size_t complete_utf8_prefix(std::string_view s, size_t* incomplete_tail);

// True if NFC(s) == s is guaranteed by the quick check (the common case: no
// code point in s can be changed by NFC).
bool nfc_quick_check(std::string_view s);

// Unicode Normalization Form C. Exact (canonical decomposition, canonical
// ordering, canonical composition with exclusions, Hangul). Invalid bytes
// pass through unchanged and block composition across them.
std::string nfc(std::string_view s);
// The same in one pass without copying already-normalized text: returns s
// itself if it is NFC, else its NFC written into `storage`.
std::string_view nfc(std::string_view s, std::string& storage);
// NFC by the full algorithm over the whole text, without the shortcut of
// normalizing only the chunks that can change; a reference for tests.
std::string nfc_full(std::string_view s);

}  // namespace pocket::unicode
