#include "constrain/constraint.h"

#include "constrain/gbnf.h"
#include "constrain/json_frames.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "util/error.h"

namespace pocket::constrain {

const char* kind_name(ConstraintSpec::Kind k) {
  switch (k) {
    case ConstraintSpec::Kind::None: return "none";
    case ConstraintSpec::Kind::JsonSchema: return "json-schema";
    case ConstraintSpec::Kind::Json: return "json";
    case ConstraintSpec::Kind::Regex: return "regex";
    case ConstraintSpec::Kind::Choice: return "choice";
    case ConstraintSpec::Kind::Grammar: return "grammar";
  }
  return "?";
}

Grammar compile_spec(const ConstraintSpec& spec) {
  JsonOptions jo;
  jo.max_ws = spec.json_max_ws;
  jo.open = spec.json_open;
  switch (spec.kind) {
    case ConstraintSpec::Kind::JsonSchema: return compile_json_schema(spec.text, jo);
    case ConstraintSpec::Kind::Json: return compile_any_json(jo);
    case ConstraintSpec::Kind::Regex: return compile_regex(spec.text);
    case ConstraintSpec::Kind::Grammar: return compile_gbnf(spec.text);
    case ConstraintSpec::Kind::Choice: {
      if (spec.choices.empty()) fail_as(ErrorCode::InvalidArgument, "choice: the list of choices is empty");
      if (spec.choices.size() > Limits::kMaxEnum)
        fail_as(ErrorCode::InvalidArgument, "choice: too many choices (", spec.choices.size(), ", at most ", Limits::kMaxEnum, ")");
      GrammarBuilder b;
      int root = b.add_rule("root");
      Alts alts;
      for (auto& c : spec.choices) alts.push_back(b.literal(c));
      b.define(root, std::move(alts));
      return std::move(b).finish(root);
    }
    case ConstraintSpec::Kind::None: break;
  }
  fail_as(ErrorCode::InvalidArgument, "no constraint given");
}

std::shared_ptr<const Constraint> compile_constraint(const ConstraintSpec& spec, std::shared_ptr<const VocabIndex> vocab) {
  auto c = std::make_shared<Constraint>();
  c->grammar = std::make_shared<const CompiledGrammar>(compile_spec(spec));
  c->vocab = std::move(vocab);
  // A vocabulary's first JSON constraint walks the common JSON frames.
  if (spec.kind == ConstraintSpec::Kind::JsonSchema || spec.kind == ConstraintSpec::Kind::Json) warm_json_frames(c->vocab);
  return c;
}

std::shared_ptr<const Constraint> compile_constraint(const ConstraintSpec& spec, const Tokenizer& tok) {
  return compile_constraint(spec, VocabIndex::build(tok));
}

}  // namespace pocket::constrain
