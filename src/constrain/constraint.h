// A constraint on generation, as the user gives it (one kind at a time), and
// its compiled form bound to a tokenizer's vocabulary.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "constrain/matcher.h"

namespace pocket {
class Tokenizer;
}

namespace pocket::constrain {

struct ConstraintSpec {
  enum class Kind { None, JsonSchema, Json, Regex, Choice, Grammar } kind = Kind::None;
  std::string text;                  // the schema, regex or GBNF text
  std::vector<std::string> choices;  // Kind::Choice
  int json_max_ws = 0;               // JSON: whitespace allowed between tokens (0 = compact)
  bool json_open = false;            // JSON Schema: absent additionalProperties / items allow more (the spec)

  bool active() const { return kind != Kind::None; }
};

const char* kind_name(ConstraintSpec::Kind k);

// Compiles the spec (throws pocket::Error with a clear message).
Grammar compile_spec(const ConstraintSpec& spec);

// What generation holds: the compiled grammar and the vocabulary index.
struct Constraint {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::shared_ptr<const VocabIndex> vocab;
  Matcher matcher() const { return Matcher(grammar, vocab); }
};

std::shared_ptr<const Constraint> compile_constraint(const ConstraintSpec& spec, const Tokenizer& tok);
std::shared_ptr<const Constraint> compile_constraint(const ConstraintSpec& spec, std::shared_ptr<const VocabIndex> vocab);

}  // namespace pocket::constrain
