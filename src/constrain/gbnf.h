// GBNF grammars in llama.cpp's syntax: `name ::= alternatives` rules
// (the start rule is `root`), "literals" with escapes, [character classes]
// (ranges, negation, escapes), `.` (any character), rule references,
// ( groups ), alternation |, * + ? {m} {m,} {m,n} {,n}, # comments.
// Rules may span lines. Errors name the rule or the offset at fault:
// undefined rules, left recursion, a grammar that matches nothing.
#pragma once
#include <string_view>

#include "constrain/grammar.h"

namespace pocket::constrain {

Grammar compile_gbnf(std::string_view text);

}  // namespace pocket::constrain
