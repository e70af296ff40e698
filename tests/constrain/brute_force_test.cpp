// The matcher's token masks against brute force: on small vocabularies and
// random grammars (GBNF text built at random, regexes), every token's bit
// must equal "prefix + token bytes can still be completed" by a plain Earley
// recognizer, and the end-of-sequence bit must equal "prefix is a complete
// match". Tokens split multi-byte characters and span several terminals.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "common/test_util.h"
#include "constrain/constraint.h"
#include "constrain/gbnf.h"
#include "constrain/regex.h"
#include "test_vocab.h"
#include "reference.h"
#include "util/error.h"

namespace pocket::constrain {
namespace {

// Units the random grammars and vocabularies are built from: ASCII, a
// 2-byte and a 3-byte character.
const std::vector<std::string> kUnits = {"a", "b", "c", "\xC3\xA9", "\xE4\xB8\xAD"};

std::string random_gbnf(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const int rules = 1 + pick(4);
  std::string out;
  std::function<std::string(int, int)> item = [&](int self, int depth) -> std::string {
    switch (pick(depth > 2 ? 3 : 6)) {
      case 0: return "\"" + kUnits[pick(5)] + (pick(2) ? kUnits[pick(5)] : "") + "\"";
      case 1: return pick(2) ? "[ab\xC3\xA9]" : "[^a]";
      case 2: return "r" + std::to_string(pick(rules));
      case 3: {
        std::string g = "(" + item(self, depth + 1) + " " + item(self, depth + 1) + " | " + item(self, depth + 1) + ")";
        static const char* q[] = {"*", "+", "?", "{1,2}", "{2}", ""};
        return g + q[pick(6)];
      }
      case 4: return "[a-c]";
      default: return "\"" + kUnits[pick(5)] + "\"" + (pick(2) ? "*" : "?");
    }
  };
  for (int r = 0; r < rules; ++r) {
    out += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::= ";
    const int alts = 1 + pick(3);
    for (int a = 0; a < alts; ++a) {
      if (a) out += " | ";
      const int n = pick(4);
      if (n == 0) out += "\"\"";
      for (int i = 0; i < n; ++i) out += item(r, 0) + " ";
    }
    out += "  # rule " + std::to_string(r) + "\n";
  }
  // r0 is referred to as root.
  std::string fixed;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 'r' && i + 1 < out.size() && out[i + 1] == '0' && (i == 0 || out[i - 1] == ' ' || out[i - 1] == '(')) {
      fixed += "root";
      ++i;
    } else {
      fixed += out[i];
    }
  }
  return fixed;
}

// Every bit of the matcher's mask after `prefix` against the reference;
// returns the allowed tokens (end-of-sequence left out).
std::vector<int32_t> check_mask(Matcher& m, const test::Earley& ref, const VocabIndex& vocab, const std::string& prefix,
                                const std::string& what) {
  auto mask = m.mask();
  std::vector<int32_t> allowed;
  const int32_t eos = vocab.eos_ids[0];
  for (int32_t t = 0; t < vocab.vocab_size; ++t) {
    const bool bit = (mask[t >> 6] >> (t & 63)) & 1;
    bool expect;
    if (t == eos) expect = ref.run(prefix).second;
    else expect = !vocab.excluded[t] && ref.run(prefix + vocab.bytes[t]).first;
    EXPECT_EQ(bit, expect) << what << "\nprefix '" << prefix << "' token " << t << " '" << vocab.bytes[t] << "'";
    EXPECT_EQ(bit, m.would_accept(t));
    if (bit != expect) return {};
    if (bit && t != eos) allowed.push_back(t);
  }
  EXPECT_EQ(m.accepting(), ref.run(prefix).second) << what << " prefix '" << prefix << "'";
  return allowed;
}

// Checks the masks along a random walk of `steps` tokens from the start.
void check_walk(const Grammar& g, const std::shared_ptr<const VocabIndex>& vocab, std::mt19937& rng, int steps,
                const std::string& what) {
  test::Earley ref(g);
  Matcher m(std::make_shared<const CompiledGrammar>(g), vocab);
  std::string prefix;
  for (int step = 0; step <= steps; ++step) {
    const std::vector<int32_t> allowed = check_mask(m, ref, *vocab, prefix, what);
    if (::testing::Test::HasFailure()) return;
    if (allowed.empty()) break;
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.advance(t));
    prefix += vocab->bytes[t];
  }
  // Rolling back (the speculative-decoding hook) returns to the start state.
  const int n = m.advances();
  std::vector<uint64_t> end_mask(m.mask().begin(), m.mask().end());
  m.rollback(n);
  EXPECT_EQ(m.advances(), 0);
  EXPECT_EQ(m.accepting(), ref.run("").second);
  EXPECT_THROW(m.rollback(1), Error);
}

// Counted repetitions keep their count on the matcher's stack and share one
// frame walk across counts; the masks at every count from 0 to past the
// upper bound (so at 0, 1, m-1, m, n-1 and n), with the count reached by
// 1-, 2- and 3-byte characters and the last character cut after its first
// byte, must equal the reference's. The vocabulary is shared by all the
// grammars, so frames reused across grammars are checked too.
TEST(ConstrainBruteForce, CountedRepetitionsAtTheirBoundsEqualTheReference) {
  const std::vector<std::string> units = {"a", "\"", ",", "}", "\xC3\xA9", "\xE4\xB8\xAD"};
  std::mt19937 rng(77);
  auto vocab = test_vocab(units, 160, rng);
  const std::vector<std::string> chars = {"a", "\xC3\xA9", "\xE4\xB8\xAD"};
  struct Bounds {
    int min, max;  // max < 0: unbounded
  };
  for (Bounds b : {Bounds{0, 2}, Bounds{1, 3}, Bounds{2, 2}, Bounds{3, 6}, Bounds{0, 9}, Bounds{4, -1}, Bounds{2, 5}}) {
    const std::string count = "{" + std::to_string(b.min) + "," + (b.max < 0 ? "" : std::to_string(b.max)) + "}";
    const std::string text = "root ::= \"\\\"\" [^\"]" + count + " \"\\\"\" (\",\" [^\",}]" + count + ")? \"}\"";
    const Grammar g = compile_gbnf(text);
    const test::Earley ref(g);
    const int top = (b.max < 0 ? b.min + 2 : b.max + 1);
    for (int c = 0; c <= top; ++c) {
      for (int cut = 0; cut < 2; ++cut) {
        std::string prefix = "\"";
        for (int k = 0; k < c; ++k) prefix += chars[(k + c) % chars.size()];
        if (cut) prefix += "\xE4";  // a 3-byte character cut after its first byte
        Matcher m(std::make_shared<const CompiledGrammar>(g), vocab);
        const bool viable = ref.run(prefix).first;
        ASSERT_EQ(m.advance_bytes(prefix), viable) << text << " prefix '" << prefix << "'";
        if (!viable) continue;
        check_mask(m, ref, *vocab, prefix, text);
        if (HasFailure()) return;
      }
    }
    // Random walks add mixed paths; the fixed prefixes above are the bounds.
    for (int walk = 0; walk < (::pocket::test::emulated() ? 1 : 4); ++walk) {
      check_walk(g, vocab, rng, 10, text);
      if (HasFailure()) return;
    }
  }
  // An ambiguous item (one or two characters): one token ends parses with
  // different counts, inside the repetition and past it.
  for (const char* text : {"root ::= (\"a\" | \"aa\" | \"\xC3\xA9\"){3,5} \"\\\"\" | \"a\"{7} \",\"",
                           "root ::= (\"a\" | \"a\" \"a\"){2,3} (\"}\" | \"a\" \",\")"}) {
    const Grammar g = compile_gbnf(text);
    const test::Earley ref(g);
    for (int c = 0; c <= 11; ++c) {
      const std::string prefix(static_cast<size_t>(c), 'a');
      Matcher m(std::make_shared<const CompiledGrammar>(g), vocab);
      if (!m.advance_bytes(prefix)) {
        EXPECT_FALSE(ref.run(prefix).first) << text << " prefix '" << prefix << "'";
        continue;
      }
      check_mask(m, ref, *vocab, prefix, text);
      if (HasFailure()) return;
    }
    for (int walk = 0; walk < (::pocket::test::emulated() ? 2 : 6); ++walk) {
      check_walk(g, vocab, rng, 8, text);
      if (HasFailure()) return;
    }
  }
}

TEST(ConstrainBruteForce, RandomGbnfGrammarsMasksEqualTheReference) {
  std::mt19937 rng(12345);
  auto vocab = test_vocab(kUnits, 120, rng);
  int compiled = 0, rejected = 0, ambiguous = 0;
  for (int i = 0; i < 150; ++i) {
    const std::string text = random_gbnf(rng);
    Grammar g;
    try {
      g = compile_gbnf(text);
    } catch (const Error& e) {  // left recursion or nothing matched: a clear error is the right answer
      const std::string msg = e.what();
      EXPECT_TRUE(msg.find("left-recursive") != std::string::npos || msg.find("matches nothing") != std::string::npos)
          << msg << "\n" << text;
      ++rejected;
      continue;
    }
    ++compiled;
    try {
      check_walk(g, vocab, rng, 6, text);
    } catch (const Error& e) {  // exponentially ambiguous: a clear error, not a hang
      EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
      ++ambiguous;
    }
    if (HasFailure()) return;
  }
  EXPECT_GE(compiled - ambiguous, 80) << rejected << " rejected, " << ambiguous << " too ambiguous";
}

std::string random_regex(std::mt19937& rng, int depth = 0) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::string out;
  const int n = 1 + pick(3);
  for (int i = 0; i < n; ++i) {
    std::string atom;
    switch (pick(depth > 1 ? 3 : 5)) {
      case 0: atom = std::string(1, "abc"[pick(3)]); break;
      case 1: atom = pick(2) ? "[a-b]" : "[^b]"; break;
      case 2: atom = "."; break;
      case 3: atom = "(" + random_regex(rng, depth + 1) + "|" + random_regex(rng, depth + 1) + ")"; break;
      default: atom = "(?:" + random_regex(rng, depth + 1) + ")"; break;
    }
    static const char* q[] = {"", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}"};
    out += atom + q[pick(8)];
  }
  return out;
}

TEST(ConstrainBruteForce, RandomRegexesMasksEqualTheReferenceAndMatchStdRegex) {
  std::mt19937 rng(777);
  auto vocab = test_vocab({"a", "b", "c", "\n"}, 80, rng);
  for (int i = 0; i < 80; ++i) {
    const std::string re = random_regex(rng);
    Grammar g = compile_regex(re);
    check_walk(g, vocab, rng, 4, re);
    if (HasFailure()) return;
    // Full-match semantics against std::regex (ECMAScript) on random strings.
    const std::regex sre(re);
    auto cg = std::make_shared<const CompiledGrammar>(g);
    for (int k = 0; k < 25; ++k) {
      std::string s;
      const int len = static_cast<int>(rng() % 6);
      for (int j = 0; j < len; ++j) s += "abc\n"[rng() % 4];
      Matcher m(cg, vocab);
      const bool ours = m.advance_bytes(s) && m.accepting();
      ASSERT_EQ(ours, std::regex_match(s, sre)) << "regex " << re << " on '" << s << "'";
    }
  }
}

}  // namespace
}  // namespace pocket::constrain
