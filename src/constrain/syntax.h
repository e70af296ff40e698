// Pieces shared by the regex and GBNF parsers: a cursor over the source
// text that reports errors with their offset, UTF-8 code points, escapes and
// bracket character classes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/grammar.h"

namespace pocket::constrain {

struct Cursor {
  std::string_view s;
  size_t i = 0;
  const char* what = "";  // "regex", "GBNF"

  bool done() const { return i >= s.size(); }
  char peek(size_t k = 0) const { return i + k < s.size() ? s[i + k] : '\0'; }
  bool eat(char c) {
    if (peek() != c || done()) return false;
    ++i;
    return true;
  }
  [[noreturn]] void fail(std::string_view msg) const;
  // One UTF-8 code point (invalid UTF-8 is an error).
  uint32_t code_point();
  // After a backslash: the escaped code point for \n \t \r \f \v \0 \xHH
  // \uHHHH \u{H..} \UHHHHHHHH and escaped punctuation. Returns false (and
  // consumes nothing) for a letter it does not know, so callers can handle
  // classes like \d.
  bool simple_escape(uint32_t& cp);
  uint32_t hex(int digits);
};

// \d \w \s and their negations (after the backslash); false if not a class.
bool class_escape(char c, std::vector<CpRange>& out);

// A bracket class after '['; consumes through ']'. `negated` says whether it
// began with '^'. The result is already complemented when negated.
std::vector<CpRange> parse_bracket_class(Cursor& c);

}  // namespace pocket::constrain
