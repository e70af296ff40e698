// The structured-output flags shared by `pocket run` and `pocket bench`:
// --json-schema FILE | --json | --regex RE | --choice A --choice B |
// --grammar FILE.gbnf, and --json-ws N.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "constrain/constraint.h"

namespace pocket::cli {

struct ConstraintFlags {
  std::string schema_file, grammar_file, regex;
  std::vector<std::string> choices;
  bool json = false;
  int json_ws = 0;
  bool json_open = false;

  // `any_json_flag`: the name of --json (bench has its own --json).
  void add_to(CLI::App& app, const std::string& any_json_flag = "--json");
  bool given() const;
  // Reads the files; throws CLI::ValidationError when two kinds are given.
  constrain::ConstraintSpec spec() const;
};

}  // namespace pocket::cli
