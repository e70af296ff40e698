#include "util/json_cursor.h"

#include <bit>
#include <cstring>

#include "util/error.h"
#include "util/utf8.h"

namespace pocket {
namespace {

// Bytes a string's fast loop stops at: the quote, the backslash, control
// characters (not allowed raw in JSON) and the start of a multi-byte
// UTF-8 sequence (validated on the slow path).
struct StopTable {
  bool stop[256] = {};
  constexpr StopTable() {
    for (int c = 0; c < 0x20; ++c) stop[c] = true;
    for (int c = 0x80; c < 0x100; ++c) stop[c] = true;
    stop[static_cast<unsigned char>('"')] = true;
    stop[static_cast<unsigned char>('\\')] = true;
  }
};
constexpr StopTable kStop;

// Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no
// surrogates, at most U+10FFFF), or 0.
size_t utf8_sequence(const unsigned char* p, size_t left) {
  const unsigned c = p[0];
  auto cont = [&](size_t k) { return k < left && (p[k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && p[1] >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && p[1] >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void JsonCursor::error_at(size_t offset, std::string_view problem) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  fail(source_, ": invalid JSON at line ", line, " column ", col, ": ", problem);
}

void JsonCursor::skip_ws_slow() {
  const size_t n = text_.size();
  for (;;) {
    // Pretty-printed files indent with runs of spaces: eight at a time.
    while (std::endian::native == std::endian::little && pos_ + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, text_.data() + pos_, 8);
      const uint64_t x = w ^ 0x2020202020202020ull;
      if (x != 0) {
        pos_ += static_cast<size_t>(std::countr_zero(x)) / 8;  // the first non-space
        break;
      }
      pos_ += 8;
    }
    if (pos_ >= n) return;
    const char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
    ++pos_;
  }
}

void JsonCursor::expect(char c) {
  if (consume(c)) return;
  if (pos_ >= text_.size()) error(std::string("unexpected end of text, expected '") + c + "'");
  error(std::string("expected '") + c + "'");
}

void JsonCursor::read_string(std::string& out) {
  out.clear();
  if (peek() != '"') error("expected a string");
  const auto* p = reinterpret_cast<const unsigned char*>(text_.data());
  const size_t n = text_.size();
  size_t i = pos_ + 1;
  // Fast path: a string without escapes is validated, then copied once.
  const size_t start = i;
  for (;;) {
    while (i < n && !kStop.stop[p[i]]) ++i;
    if (i >= n || p[i] < 0x20 || p[i] == '\\') break;  // the slow loop reports or unescapes
    if (p[i] == '"') {
      out.assign(text_.data() + start, i - start);
      pos_ = i + 1;
      return;
    }
    const size_t len = utf8_sequence(p + i, n - i);
    if (len == 0) break;
    i += len;
  }
  out.assign(text_.data() + start, i - start);
  for (;;) {
    const size_t run = i;
    while (i < n && !kStop.stop[p[i]]) ++i;
    out.append(text_.data() + run, i - run);
    if (i >= n) {
      pos_ = i;
      error("unterminated string");
    }
    const unsigned char c = p[i];
    if (c == '"') {
      pos_ = i + 1;
      return;
    }
    if (c >= 0x80) {
      const size_t len = utf8_sequence(p + i, n - i);
      if (len == 0) {
        pos_ = i;
        error("invalid UTF-8 in a string");
      }
      out.append(text_.data() + i, len);
      i += len;
      continue;
    }
    if (c < 0x20) {
      pos_ = i;
      error("control character in a string (must be escaped)");
    }
    // A backslash escape.
    if (i + 1 >= n) {
      pos_ = i;
      error("unterminated string");
    }
    const char e = text_[i + 1];
    i += 2;
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](size_t at) -> int32_t {
          if (at + 4 > n) return -1;
          int32_t v = 0;
          for (size_t k = 0; k < 4; ++k) {
            const int d = hex_digit(text_[at + k]);
            if (d < 0) return -1;
            v = v * 16 + d;
          }
          return v;
        };
        int32_t cp = hex4(i);
        if (cp < 0) {
          pos_ = i;
          error("bad \\u escape");
        }
        i += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          pos_ = i - 6;
          error("lone low surrogate in a \\u escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          const int32_t lo = i + 6 <= n && text_[i] == '\\' && text_[i + 1] == 'u' ? hex4(i + 2) : -1;
          if (lo < 0xDC00 || lo > 0xDFFF) {
            pos_ = i - 6;
            error("high surrogate not followed by a low surrogate in a \\u escape");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
        utf8::append(out, static_cast<uint32_t>(cp));
        break;
      }
      default:
        pos_ = i - 2;
        error("bad escape in a string");
    }
  }
}

const char* JsonCursor::read_integer(int64_t& out) {
  skip_ws();
  size_t i = pos_;
  const bool neg = i < text_.size() && text_[i] == '-';
  if (neg) ++i;
  const size_t digits = i;
  uint64_t v = 0;
  while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') {
    if (i - digits >= 18) return "integer too large";
    v = v * 10 + static_cast<uint64_t>(text_[i] - '0');
    ++i;
  }
  if (i == digits) return "not an integer";
  if (text_[digits] == '0' && i - digits > 1) return "leading zero in a number";
  if (i < text_.size() && (text_[i] == '.' || text_[i] == 'e' || text_[i] == 'E')) return "not an integer";
  pos_ = i;
  out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return nullptr;
}

std::string_view JsonCursor::skip_value() {
  const char first = peek();
  const size_t start = pos_;
  if (first == '"') {
    std::string scratch;
    read_string(scratch);
    return text_.substr(start, pos_ - start);
  }
  if (first != '{' && first != '[') {  // a number or literal: up to a delimiter
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') break;
      ++pos_;
    }
    if (pos_ == start) error("expected a value");
    return text_.substr(start, pos_ - start);
  }
  // Brackets must nest properly; kept on a small explicit stack so hostile
  // depth costs memory proportional to the input, never the call stack.
  std::string open;
  std::string scratch;
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '"') {
      read_string(scratch);
      continue;
    }
    if (c == '{' || c == '[') {
      open.push_back(c);
    } else if (c == '}' || c == ']') {
      if (open.empty() || open.back() != (c == '}' ? '{' : '[')) error("mismatched bracket");
      open.pop_back();
      if (open.empty()) {
        ++pos_;
        return text_.substr(start, pos_ - start);
      }
    }
    ++pos_;
  }
  error("unexpected end of text inside a value");
}

}  // namespace pocket
