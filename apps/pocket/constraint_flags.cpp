#include "constraint_flags.h"

#include "util/mapped_file.h"

namespace pocket::cli {

void ConstraintFlags::add_to(CLI::App& app, const std::string& any_json_flag) {
  app.add_option("--json-schema", schema_file, "Constrain the output to JSON valid under this JSON Schema file");
  app.add_flag(any_json_flag, json, "Constrain the output to any JSON value");
  app.add_option("--regex", regex, "Constrain the output to match this regular expression (whole output)");
  app.add_option("--choice", choices, "Constrain the output to one of these strings (repeatable)");
  app.add_option("--grammar", grammar_file, "Constrain the output to this GBNF grammar file (llama.cpp syntax)");
  app.add_option("--json-ws", json_ws, "JSON: whitespace characters allowed between tokens (default 0: compact)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--json-open", json_open,
               "JSON Schema: where additionalProperties (or items after prefixItems) is absent, allow further "
               "properties (items) as the spec does (default: closed, only what the schema lists)");
}

bool ConstraintFlags::given() const {
  return !schema_file.empty() || json || !regex.empty() || !choices.empty() || !grammar_file.empty();
}

constrain::ConstraintSpec ConstraintFlags::spec() const {
  using Kind = constrain::ConstraintSpec::Kind;
  const int kinds = !schema_file.empty() + json + !regex.empty() + !choices.empty() + !grammar_file.empty();
  if (kinds > 1)
    throw CLI::ValidationError("constraint", "give one of --json-schema, --json, --regex, --choice, --grammar");
  constrain::ConstraintSpec s;
  s.json_max_ws = json_ws;
  s.json_open = json_open;
  if (!schema_file.empty()) s.kind = Kind::JsonSchema, s.text = read_text_file(schema_file);
  if (json) s.kind = Kind::Json;
  if (!regex.empty()) s.kind = Kind::Regex, s.text = regex;
  if (!choices.empty()) s.kind = Kind::Choice, s.choices = choices;
  if (!grammar_file.empty()) s.kind = Kind::Grammar, s.text = read_text_file(grammar_file);
  return s;
}

}  // namespace pocket::cli
