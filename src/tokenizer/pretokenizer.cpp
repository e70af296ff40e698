#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace pocket {
namespace {

using unicode::CharClass;

constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Char {
  uint32_t cp;
  uint32_t offset;  // byte offset in the text
  CharClass cls;
};

// Scans one text; match(i) returns the end (in chars) of the piece at i.
class Scanner {
 public:
  explicit Scanner(std::string_view text) {
    chars_.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      size_t len;
      const uint32_t cp = unicode::decode(text, i, len);
      chars_.push_back({cp, static_cast<uint32_t>(i), unicode::char_class(cp)});
      i += len;
    }
    end_offset_ = static_cast<uint32_t>(text.size());
  }
  size_t size() const { return chars_.size(); }
  uint32_t offset(size_t i) const { return i < chars_.size() ? chars_[i].offset : end_offset_; }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d) or its case-sensitive form; 0 if no match.
  size_t contraction(size_t i, bool ignore_case) const {
    if (chars_[i].cp != '\'' || i + 1 >= size()) return 0;
    auto is = [&](size_t k, char lower) {
      if (k >= size()) return false;
      uint32_t c = chars_[k].cp;
      if (c == static_cast<uint32_t>(lower)) return true;
      if (!ignore_case) return false;
      // Unicode simple case folding: s also matches U+017F LATIN SMALL LETTER LONG S.
      return c == static_cast<uint32_t>(lower - 'a' + 'A') || (lower == 's' && c == 0x17F);
    };
    if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) return 2;
    if ((is(i + 1, 'r') || is(i + 1, 'v')) && is(i + 2, 'e')) return 3;
    if (is(i + 1, 'l') && is(i + 2, 'l')) return 3;
    return 0;
  }
  size_t run(size_t i, CharClass cls, size_t max_len = SIZE_MAX) const {
    size_t j = i;
    while (j < size() && j - i < max_len && chars_[j].cls == cls) ++j;
    return j;
  }
  bool is_crlf(size_t i) const { return i < size() && (chars_[i].cp == '\r' || chars_[i].cp == '\n'); }
  CharClass cls(size_t i) const { return i < size() ? chars_[i].cls : unicode::kOther; }
  bool is_class(size_t i, CharClass c) const { return i < size() && chars_[i].cls == c; }
  uint32_t cp(size_t i) const { return chars_[i].cp; }

  // \s+(?!\S)|\s+ for the whitespace run [i, j): all of it at the end of the
  // text, else all but the last space (which then prefixes the next piece).
  size_t trailing_space(size_t i, size_t j) const { return j == size() || j - i < 2 ? j : j - 1; }

 private:
  std::vector<Char> chars_;
  uint32_t end_offset_ = 0;
};

// Qwen2 (max_digits 1) and Llama 3 (max_digits 3):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_qwen2(const Scanner& s, size_t i, size_t max_digits) {
  if (size_t n = s.contraction(i, /*ignore_case=*/true)) return i + n;
  const CharClass c = s.cls(i);
  if (c == unicode::kLetter) return s.run(i, unicode::kLetter);
  if (c != unicode::kNumber && !s.is_crlf(i) && s.is_class(i + 1, unicode::kLetter))
    return s.run(i + 1, unicode::kLetter);
  if (c == unicode::kNumber) return s.run(i, unicode::kNumber, max_digits);
  if (c == unicode::kOther || (s.cp(i) == ' ' && s.is_class(i + 1, unicode::kOther))) {
    size_t j = s.run(c == unicode::kOther ? i : i + 1, unicode::kOther);
    while (s.is_crlf(j)) ++j;
    return j;
  }
  // c is whitespace.
  const size_t j = s.run(i, unicode::kSpace);
  for (size_t k = j; k > i; --k)  // \s*[\r\n]+ ends after the run's last CR/LF
    if (s.is_crlf(k - 1)) return k;
  return s.trailing_space(i, j);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Scanner& s, size_t i) {
  if (size_t n = s.contraction(i, /*ignore_case=*/false)) return i + n;
  const CharClass c = s.cls(i);
  if (c != unicode::kSpace) return s.run(i, c);
  if (s.cp(i) == ' ' && i + 1 < s.size() && s.cls(i + 1) != unicode::kSpace) return s.run(i + 1, s.cls(i + 1));
  return s.trailing_space(i, s.run(i, unicode::kSpace));
}

}  // namespace

std::string_view pretokenizer_regex(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Qwen2: return kQwen2Regex;
    case PreTokenizer::Llama3: return kLlama3Regex;
    case PreTokenizer::GPT2: return kGpt2Regex;
    case PreTokenizer::None: break;
  }
  return {};
}

std::optional<PreTokenizer> pretokenizer_from_regex(std::string_view regex) {
  for (PreTokenizer k : {PreTokenizer::Qwen2, PreTokenizer::Llama3, PreTokenizer::GPT2})
    if (regex == pretokenizer_regex(k)) return k;
  return std::nullopt;
}

void pretokenize(PreTokenizer kind, std::string_view text, std::vector<uint32_t>& ends) {
  if (text.empty()) return;
  if (kind == PreTokenizer::None) {
    ends.push_back(static_cast<uint32_t>(text.size()));
    return;
  }
  const Scanner s(text);
  for (size_t i = 0; i < s.size();) {
    size_t j = 0;
    switch (kind) {
      case PreTokenizer::Qwen2: j = match_qwen2(s, i, 1); break;
      case PreTokenizer::Llama3: j = match_qwen2(s, i, 3); break;
      case PreTokenizer::GPT2: j = match_gpt2(s, i); break;
      case PreTokenizer::None: break;
    }
    if (j <= i) fail("pre-tokenizer made no progress at character ", i);  // unreachable: a bug guard
    ends.push_back(s.offset(j));
    i = j;
  }
}

}  // namespace pocket
