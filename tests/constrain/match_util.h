// Helpers for the constrain tests: does a compiled grammar match a string.
#pragma once
#include <memory>
#include <string>

#include "constrain/constraint.h"

namespace pocket::constrain::test {

// A one-token vocabulary is enough for matching raw bytes.
inline std::shared_ptr<const VocabIndex> byte_vocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    t.push_back("");
    return VocabIndex::build(t, {}, {256});
  }();
  return v;
}

inline bool matches(const Grammar& g, const std::string& s) {
  Matcher m(std::make_shared<const CompiledGrammar>(g), byte_vocab());
  return m.advance_bytes(s) && m.accepting();
}

inline bool is_prefix(const Grammar& g, const std::string& s) {
  Matcher m(std::make_shared<const CompiledGrammar>(g), byte_vocab());
  return m.advance_bytes(s);
}

}  // namespace pocket::constrain::test
