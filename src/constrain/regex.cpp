#include "constrain/regex.h"

#include <cstdio>

#include "constrain/syntax.h"
#include "util/error.h"

namespace pocket::constrain {

Alts json_string_chars(GrammarBuilder& b, const std::vector<CpRange>& ranges) {
  std::vector<CpRange> plain;
  Alts esc;
  for (auto [lo, hi] : ranges) {
    for (uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) {
      static constexpr const char* kShort[] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                               "\\b",   "\\t",   "\\n",   nullptr, "\\f",   "\\r"};
      char buf[8];
      const char* e = cp < 14 && kShort[cp] ? kShort[cp] : (std::snprintf(buf, sizeof buf, "\\u%04x", cp), buf);
      esc.push_back(b.literal(e));
    }
    if (lo <= '"' && hi >= '"') esc.push_back(b.literal("\\\""));
    if (lo <= '\\' && hi >= '\\') esc.push_back(b.literal("\\\\"));
    uint32_t l = std::max<uint32_t>(lo, 0x20);
    for (uint32_t cut : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (l <= cut && hi >= cut) {
        if (l < cut) plain.emplace_back(l, cut - 1);
        l = cut + 1;
      }
    }
    if (l <= hi) plain.emplace_back(l, hi);
  }
  Alts out = plain.empty() ? Alts{} : b.codepoints(plain);
  out.insert(out.end(), esc.begin(), esc.end());
  return out;
}

namespace {

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view re, bool json) : b_(b), json_(json) {
    c_.s = re;
    c_.what = "regex";
  }

  RegexParse parse() {
    RegexParse r;
    r.anchored_start = c_.eat('^');
    r.alts = alternation();
    if (!c_.done()) c_.fail(c_.peek() == ')' ? "unbalanced ')'" : "unexpected character");
    r.anchored_end = end_anchor_;
    return r;
  }

 private:
  Alts alternation() {
    if (++depth_ > Limits::kMaxNesting) c_.fail("groups nested too deeply");
    Alts out{concat()};
    while (c_.eat('|')) out.push_back(concat());
    --depth_;
    return out;
  }

  Seq concat() {
    Seq out;
    while (!c_.done() && c_.peek() != '|' && c_.peek() != ')') {
      if (c_.peek() == '$') {
        ++c_.i;
        if (depth_ != 1 || !c_.done()) c_.fail("'$' is only supported at the end of the pattern");
        end_anchor_ = true;
        break;
      }
      Alts a = atom();
      int lo = 1, hi = 1;
      bool quantified = false;
      while (quantifier(lo, hi)) quantified = true;
      if (!quantified) {
        if (a.size() == 1) {
          out.insert(out.end(), a[0].begin(), a[0].end());
        } else {
          out.push_back(b_.group(std::move(a), "re"));
        }
        continue;
      }
      Seq r = b_.repeat(a, lo, hi, "re");
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  }

  int number() {
    if (c_.peek() < '0' || c_.peek() > '9') c_.fail("expected a number in {m,n}");
    long v = 0;
    while (c_.peek() >= '0' && c_.peek() <= '9' && !c_.done()) {
      v = v * 10 + (c_.peek() - '0');
      if (v > Limits::kMaxRepeat) c_.fail(cat("repetition count too large (at most ", Limits::kMaxRepeat, ")"));
      ++c_.i;
    }
    return static_cast<int>(v);
  }

  // Applies one quantifier to (lo, hi) if present. Stacked quantifiers
  // (a{2}{3}) multiply.
  bool quantifier(int& lo, int& hi) {
    int qlo, qhi;
    const char ch = c_.peek();
    if (c_.done()) return false;
    if (ch == '*') qlo = 0, qhi = -1;
    else if (ch == '+') qlo = 1, qhi = -1;
    else if (ch == '?') qlo = 0, qhi = 1;
    else if (ch == '{') {
      size_t save = c_.i;
      ++c_.i;
      if (c_.peek() < '0' || c_.peek() > '9') {  // a literal '{' as in ECMAScript's Annex B
        c_.i = save;
        return false;
      }
      qlo = number();
      qhi = qlo;
      if (c_.eat(',')) qhi = c_.peek() == '}' ? -1 : number();
      if (!c_.eat('}')) c_.fail("expected '}' to close {m,n}");
      if (qhi >= 0 && qhi < qlo) c_.fail("{m,n} with n < m");
      --c_.i;
    } else {
      return false;
    }
    ++c_.i;
    if (c_.peek() == '?' && !c_.done()) ++c_.i;  // lazy: same language
    else if (c_.peek() == '+' && !c_.done()) c_.fail("possessive quantifiers are not supported");
    const long nlo = static_cast<long>(lo) * qlo;
    const long nhi = hi < 0 || qhi < 0 ? -1 : static_cast<long>(hi) * qhi;
    if (nlo > Limits::kMaxRepeat || nhi > Limits::kMaxRepeat)
      c_.fail(cat("repetition count too large (at most ", Limits::kMaxRepeat, ")"));
    lo = static_cast<int>(nlo);
    hi = static_cast<int>(nhi);
    return true;
  }

  Alts chars(const std::vector<CpRange>& r) { return json_ ? json_string_chars(b_, r) : b_.codepoints(r); }

  Alts atom() {
    const char ch = c_.peek();
    if (ch == '(') {
      ++c_.i;
      if (c_.eat('?')) {
        if (c_.eat(':')) {
        } else if (c_.peek() == '<' && c_.peek(1) != '=' && c_.peek(1) != '!') {
          while (!c_.done() && c_.peek() != '>') ++c_.i;
          if (!c_.eat('>')) c_.fail("unterminated group name");
        } else if (c_.eat('P') && c_.eat('<')) {
          while (!c_.done() && c_.peek() != '>') ++c_.i;
          if (!c_.eat('>')) c_.fail("unterminated group name");
        } else {
          c_.fail("look-around and inline flags are not supported");
        }
      }
      Alts a = alternation();
      if (!c_.eat(')')) c_.fail("missing ')'");
      return a;
    }
    if (ch == '[') {
      ++c_.i;
      return chars(parse_bracket_class(c_));
    }
    if (ch == '.') {
      ++c_.i;
      return chars(GrammarBuilder::negate({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
      if (ch != '{') c_.fail("quantifier without anything to repeat");
    }
    if (ch == '^') c_.fail("'^' is only supported at the start of the pattern");
    if (c_.eat('\\')) {
      std::vector<CpRange> r;
      if (class_escape(c_.peek(), r)) {
        ++c_.i;
        return chars(r);
      }
      const char e = c_.peek();
      if (e == 'b' || e == 'B') c_.fail("word boundaries (\\b, \\B) are not supported");
      if (e >= '1' && e <= '9') c_.fail("back-references are not supported");
      uint32_t cp;
      if (!c_.simple_escape(cp)) c_.fail(cat("unknown escape \\", e));
      return chars({{cp, cp}});
    }
    const uint32_t cp = c_.code_point();
    return chars({{cp, cp}});
  }

  GrammarBuilder& b_;
  Cursor c_;
  bool json_;
  bool end_anchor_ = false;
  int depth_ = 0;
};

}  // namespace

RegexParse parse_regex(GrammarBuilder& b, std::string_view re, bool json_string) {
  return RegexParser(b, re, json_string).parse();
}

Grammar compile_regex(std::string_view re) {
  GrammarBuilder b;
  int root = b.add_rule("root");
  RegexParse p = parse_regex(b, re);
  b.define(root, std::move(p.alts));
  return std::move(b).finish(root);
}

}  // namespace pocket::constrain
