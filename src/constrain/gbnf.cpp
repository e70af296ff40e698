#include "constrain/gbnf.h"

#include <unordered_map>

#include "constrain/syntax.h"
#include "util/error.h"

namespace pocket::constrain {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) {
    c_.s = text;
    c_.what = "GBNF";
  }

  Grammar parse() {
    skip_space();
    while (!c_.done()) {
      std::string name = rule_name();
      skip_space();
      if (!(c_.eat(':') && c_.eat(':') && c_.eat('='))) c_.fail(cat("expected '::=' after rule name '", name, "'"));
      int r = rule(name);
      if (b_.defined(r)) c_.fail(cat("rule '", name, "' is defined twice"));
      b_.define(r, alternation());
      skip_space();
    }
    auto it = ids_.find("root");
    if (it == ids_.end() || !b_.defined(it->second)) fail_as(ErrorCode::InvalidArgument, "GBNF: the grammar has no 'root' rule");
    return std::move(b_).finish(it->second);
  }

 private:
  void skip_space() {
    while (!c_.done()) {
      const char ch = c_.peek();
      if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
        ++c_.i;
      } else if (ch == '#') {
        while (!c_.done() && c_.peek() != '\n') ++c_.i;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t start = c_.i;
    while (!c_.done() && name_char(c_.peek())) ++c_.i;
    if (c_.i == start) c_.fail("expected a rule name");
    return std::string(c_.s.substr(start, c_.i - start));
  }

  int rule(const std::string& name) {
    auto [it, fresh] = ids_.try_emplace(name, 0);
    if (fresh) it->second = b_.add_rule(name);
    return it->second;
  }

  // Is the cursor at the start of the next rule (`name ::=`)?
  bool at_rule_start() const {
    size_t k = c_.i;
    while (k < c_.s.size() && name_char(c_.s[k])) ++k;
    if (k == c_.i) return false;
    while (k < c_.s.size() && (c_.s[k] == ' ' || c_.s[k] == '\t')) ++k;
    return c_.s.substr(k, 3) == "::=";
  }

  Alts alternation() {
    if (++depth_ > Limits::kMaxNesting) c_.fail("groups nested too deeply");
    Alts out{sequence()};
    while (c_.eat('|')) out.push_back(sequence());
    --depth_;
    return out;
  }

  Seq sequence() {
    Seq out;
    for (;;) {
      skip_space();
      if (c_.done() || c_.peek() == '|' || c_.peek() == ')' || at_rule_start()) break;
      Alts a = atom();
      int lo = 1, hi = 1;
      bool q = quantifier(lo, hi);
      if (!q) {
        if (a.size() == 1) out.insert(out.end(), a[0].begin(), a[0].end());
        else out.push_back(b_.group(std::move(a), "group"));
        continue;
      }
      Seq r = b_.repeat(a, lo, hi, "rep");
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  }

  int number() {
    skip_space();
    if (c_.peek() < '0' || c_.peek() > '9' || c_.done()) c_.fail("expected a number in {m,n}");
    long v = 0;
    while (!c_.done() && c_.peek() >= '0' && c_.peek() <= '9') {
      v = v * 10 + (c_.peek() - '0');
      if (v > Limits::kMaxRepeat) c_.fail(cat("repetition count too large (at most ", Limits::kMaxRepeat, ")"));
      ++c_.i;
    }
    skip_space();
    return static_cast<int>(v);
  }

  bool quantifier(int& lo, int& hi) {
    if (c_.done()) return false;
    const char ch = c_.peek();
    if (ch == '*') lo = 0, hi = -1;
    else if (ch == '+') lo = 1, hi = -1;
    else if (ch == '?') lo = 0, hi = 1;
    else if (ch == '{') {
      ++c_.i;
      skip_space();
      lo = c_.peek() == ',' ? 0 : number();
      hi = lo;
      if (c_.eat(',')) {
        skip_space();
        hi = c_.peek() == '}' ? -1 : number();
      }
      if (!c_.eat('}')) c_.fail("expected '}' to close {m,n}");
      if (hi >= 0 && hi < lo) c_.fail("{m,n} with n < m");
      --c_.i;
    } else {
      return false;
    }
    ++c_.i;
    if (!c_.done() && (c_.peek() == '*' || c_.peek() == '+' || c_.peek() == '?'))
      c_.fail("two quantifiers in a row (group the first one in parentheses)");
    return true;
  }

  Alts atom() {
    const char ch = c_.peek();
    if (ch == '"') {
      ++c_.i;
      Seq seq;
      while (!c_.eat('"')) {
        if (c_.done()) c_.fail("unterminated string literal");
        uint32_t cp;
        if (c_.eat('\\')) {
          if (!c_.simple_escape(cp)) c_.fail(cat("unknown escape \\", c_.peek(), " in a literal"));
        } else {
          cp = c_.code_point();
        }
        Alts one = b_.codepoints({{cp, cp}});
        seq.insert(seq.end(), one[0].begin(), one[0].end());
      }
      return {seq};
    }
    if (ch == '[') {
      ++c_.i;
      auto r = parse_bracket_class(c_);
      Alts a = b_.codepoints(r);
      if (a.empty()) c_.fail("character class matches nothing");
      return a;
    }
    if (ch == '.') {
      ++c_.i;
      return b_.codepoints({{0, 0x10FFFF}});
    }
    if (ch == '(') {
      ++c_.i;
      Alts a = alternation();
      skip_space();
      if (!c_.eat(')')) c_.fail("missing ')'");
      return a;
    }
    if (name_char(ch)) {
      std::string name = rule_name();
      return {{Elem{true, rule(name)}}};
    }
    c_.fail(cat("unexpected character '", ch, "'"));
  }

  Cursor c_;
  GrammarBuilder b_;
  std::unordered_map<std::string, int> ids_;
  int depth_ = 0;
};

}  // namespace

Grammar compile_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace pocket::constrain
