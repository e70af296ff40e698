// Per-call cache of pre-token -> ids for byte-level BPE. Words repeat a lot
// in real text ("的", " the", "，"), so the ids a word got the first time are
// copied from where they were written in the output instead of running the
// merges again. Direct-mapped and fixed-size: a collision just replaces the
// older word, so memory stays bounded (and small enough to stay in L2)
// whatever the input.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "tokenizer/hash_tables.h"

namespace pocket::tok_detail {

class WordCache {
 public:
  // Where a cached word's ids are in the caller's output.
  struct Hit {
    uint32_t at = 0, count = 0;
  };

  // `text` is the segment whose words are cached; keys are offsets into it.
  explicit WordCache(std::string_view text) : text_(text), slots_(new Slot[kSlots]) {}

  // The slot for `word` (a substring of text), and whether it holds `word`.
  Hit* find(std::string_view word, bool& found) {
    const uint64_t h = hash_bytes(word);
    Slot& s = slots_[h & (kSlots - 1)];
    found = s.hash == h && s.len == word.size() &&
            std::memcmp(text_.data() + s.offset, word.data(), word.size()) == 0;
    if (!found) {
      s.hash = h;
      s.offset = static_cast<uint32_t>(word.data() - text_.data());
      s.len = static_cast<uint32_t>(word.size());
      s.hit = {};
    }
    return &s.hit;
  }

 private:
  static constexpr size_t kSlots = 4096;
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0, len = 0;  // the word, in text_ (len 0: empty slot, never looked up)
    Hit hit;
  };
  std::string_view text_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace pocket::tok_detail
