#include "constrain/syntax.h"

#include "util/error.h"

namespace pocket::constrain {

void Cursor::fail(std::string_view msg) const {
  fail_as(ErrorCode::InvalidArgument, what, ": ", msg, " at offset ", i);
}

uint32_t Cursor::code_point() {
  if (done()) fail("unexpected end");
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) fail("invalid UTF-8");
  uint32_t cp = b0 & (0xFF >> (n + 1));
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
  i += n;
  return cp;
}

uint32_t Cursor::hex(int digits) {
  uint32_t v = 0;
  for (int k = 0; k < digits; ++k) {
    char c = peek();
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0 || done()) fail("expected a hexadecimal digit");
    v = v * 16 + d;
    ++i;
  }
  return v;
}

bool Cursor::simple_escape(uint32_t& cp) {
  const char c = peek();
  if (done()) fail("dangling backslash");
  switch (c) {
    case 'n': cp = '\n'; break;
    case 't': cp = '\t'; break;
    case 'r': cp = '\r'; break;
    case 'f': cp = '\f'; break;
    case 'v': cp = '\v'; break;
    case '0': cp = 0; break;
    case 'x': ++i; cp = hex(2); return true;
    case 'u':
      ++i;
      if (eat('{')) {
        cp = 0;
        int k = 0;
        while (!eat('}')) {
          if (++k > 6) fail("\\u{...} escape too long");
          cp = cp * 16 + hex(1);
        }
      } else {
        cp = hex(4);
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("escape is not a Unicode scalar value");
      return true;
    case 'U':
      ++i;
      cp = hex(8);
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("escape is not a Unicode scalar value");
      return true;
    default:
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) return false;
      cp = code_point();
      return true;
  }
  ++i;
  return true;
}

bool class_escape(char c, std::vector<CpRange>& out) {
  std::vector<CpRange> r;
  switch (c | 0x20) {
    case 'd': r = {{'0', '9'}}; break;
    case 'w': r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; break;
    case 's': r = {{'\t', '\r'}, {' ', ' '}}; break;
    default: return false;
  }
  if (c >= 'A' && c <= 'Z') r = GrammarBuilder::negate(r);
  out.insert(out.end(), r.begin(), r.end());
  return true;
}

std::vector<CpRange> parse_bracket_class(Cursor& c) {
  const bool negated = c.eat('^');
  std::vector<CpRange> out;
  bool first = true;
  for (;;) {
    if (c.done()) c.fail("unterminated character class");
    if (c.peek() == ']' && !first) {
      ++c.i;
      break;
    }
    first = false;
    uint32_t lo;
    if (c.eat('\\')) {
      if (class_escape(c.peek(), out)) {
        ++c.i;
        continue;
      }
      if (!c.simple_escape(lo)) c.fail(cat("unknown escape \\", c.peek(), " in a character class"));
    } else {
      lo = c.code_point();
    }
    uint32_t hi = lo;
    if (c.peek() == '-' && c.peek(1) != ']' && c.i + 1 < c.s.size()) {
      ++c.i;
      if (c.eat('\\')) {
        if (!c.simple_escape(hi)) c.fail("bad range end in a character class");
      } else {
        hi = c.code_point();
      }
      if (hi < lo) c.fail("character class range out of order");
    }
    out.emplace_back(lo, hi);
  }
  return negated ? GrammarBuilder::negate(out) : out;
}

}  // namespace pocket::constrain
