// A forward-only cursor over JSON text. It lets a loader stream the big,
// regular parts of a document (the 151K-entry vocabulary and merge list of a
// tokenizer.json) straight into its own structures instead of building a DOM
// of a million nodes, and hand the small, irregular parts to a DOM parser as
// raw text spans. Strings are unescaped and their UTF-8 is validated; every
// error names the source and the line and column.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pocket {

class JsonCursor {
 public:
  JsonCursor(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  // The next non-whitespace character, '\0' at the end of the text.
  char peek() {
    skip_ws();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  // Consumes `c` if it is next (after whitespace).
  bool consume(char c) {
    if (peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  // Consumes `c` or fails naming what was expected.
  void expect(char c);
  // The end of the text, after whitespace.
  bool at_end() {
    skip_ws();
    return pos_ >= text_.size();
  }

  // A string value, unescaped, into `out` (replacing its contents).
  void read_string(std::string& out);
  // An integer value into `out`. On a fraction, an exponent, a number beyond
  // 60 bits or no number at all, returns the problem and consumes nothing
  // (the caller names the field); nullptr on success.
  const char* read_integer(int64_t& out);
  // Skips one value of any kind and returns its text. Only strings and the
  // nesting of brackets are checked: parse the span to validate the rest.
  std::string_view skip_value();

  // Calls f(key) for each member of an object, with the cursor at the value;
  // f must consume the value.
  template <class F>
  void members(F&& f) {
    expect('{');
    if (consume('}')) return;
    std::string key;
    do {
      read_string(key);
      expect(':');
      f(key);
    } while (consume(','));
    expect('}');
  }
  // Calls f(index) for each element of an array; f must consume it.
  template <class F>
  void elements(F&& f) {
    expect('[');
    if (consume(']')) return;
    size_t i = 0;
    do f(i++);
    while (consume(','));
    expect(']');
  }

  size_t offset() const { return pos_; }
  [[noreturn]] void error(std::string_view problem) const { error_at(pos_, problem); }
  [[noreturn]] void error_at(size_t offset, std::string_view problem) const;

 private:
  void skip_ws() {
    if (pos_ < text_.size() && static_cast<unsigned char>(text_[pos_]) > ' ') return;
    skip_ws_slow();
  }
  void skip_ws_slow();
  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
};

}  // namespace pocket
