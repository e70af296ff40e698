// JSON Schema (and "any JSON") to grammar.
//
// Supported: type (incl. unions), properties, required,
// additionalProperties (when it is absent and `properties` is given, objects
// are closed by default, as in OpenAI's strict mode and xgrammar's default:
// a small model otherwise invents extra keys; likewise an array with
// prefixItems and no items ends after them; JsonOptions::open follows the
// spec instead: any further property, any further item), enum, const,
// anyOf, oneOf (as anyOf: exact when the branches cannot match the same value, e.g. tagged unions), allOf of
// object schemas, items, prefixItems, minItems, maxItems, minLength,
// maxLength, pattern, format (date, time, date-time, email, uuid, ipv4),
// integer minimum/maximum/exclusiveMinimum/exclusiveMaximum, number
// minimum/maximum when integral, local $ref ("#...", $defs, definitions)
// incl. recursion. Annotations (title, description, default, examples, ...)
// are ignored. Anything else is an error naming the keyword and its JSON
// pointer. Properties come in the schema's order; output is compact unless
// whitespace is allowed (at most `max_ws` characters at each place JSON
// allows them); numbers have at most 16 integer and 16 fraction digits.
#pragma once
#include <string_view>

#include "constrain/grammar.h"

namespace pocket::constrain {

struct JsonOptions {
  int max_ws = 0;  // whitespace characters allowed between tokens (0 = compact)
  bool open = false;  // absent additionalProperties / items allow further properties / items (the spec)
};

Grammar compile_json_schema(std::string_view schema_text, const JsonOptions& opt = {});
Grammar compile_any_json(const JsonOptions& opt = {});

// Regex (parse_regex syntax) for integers in [lo, hi] without leading zeros.
std::string integer_range_regex(long long lo, long long hi);

}  // namespace pocket::constrain
