// Regular expressions (the common ECMAScript / PCRE subset): literals, '.',
// classes [..] with ranges and negation, \d \w \s \D \W \S, escapes, groups
// ( ) (?: ) (?<name> ), alternation, * + ? {m} {m,} {m,n} (lazy forms match
// the same strings). Anchors ^ and $ only at the ends. Back-references,
// look-around, \b and inline flags are errors. The whole string must match.
#pragma once
#include <string_view>

#include "constrain/grammar.h"

namespace pocket::constrain {

struct RegexParse {
  Alts alts;
  bool anchored_start = false, anchored_end = false;
};

// `json_string`: characters are produced as they are written inside a JSON
// string literal (", \ and control characters escaped; '.' excludes line
// breaks as in ECMAScript).
RegexParse parse_regex(GrammarBuilder& b, std::string_view re, bool json_string = false);

// Characters of `ranges` as they appear in a JSON string: plain where JSON
// allows, escaped (\" \\ \n \t \r \b \f \u00XX) otherwise.
Alts json_string_chars(GrammarBuilder& b, const std::vector<CpRange>& ranges);

Grammar compile_regex(std::string_view re);

}  // namespace pocket::constrain
