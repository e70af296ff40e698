// The two mask caches of the matcher (frame masks shared across contexts,
// full-state masks) against a plain per-token reference: would_accept walks
// each token's bytes through the grammar on its own, without any mask code.
// A state reached twice, a frame reached under different parents and a
// cache that evicts at every mask must all give the same masks.
#include <gtest/gtest.h>

#include <random>

#include "constrain/constraint.h"
#include "constrain/frame_cache.h"
#include "constrain/gbnf.h"
#include "constrain/json_frames.h"
#include "test_vocab.h"
#include "util/error.h"

namespace pocket::constrain {
namespace {

std::vector<uint64_t> copy(std::span<const uint64_t> m) { return {m.begin(), m.end()}; }

// Every bit of the mask against would_accept (end-of-sequence: accepting()).
void expect_reference(Matcher& m, const VocabIndex& v, const std::string& what) {
  const auto mask = copy(m.mask());
  for (int32_t t = 0; t < v.vocab_size; ++t) {
    const bool bit = (mask[t >> 6] >> (t & 63)) & 1;
    const bool eos = t == v.eos_ids[0];
    ASSERT_EQ(bit, eos ? m.accepting() : m.would_accept(t)) << what << " token " << t << " '" << v.bytes[t] << "'";
  }
}

// A closed object with one required property `name` of `value_schema`.
std::shared_ptr<const Constraint> one_property(const std::shared_ptr<const VocabIndex>& v, const std::string& name,
                                               const std::string& value_schema) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::JsonSchema;
  spec.text = R"({"type":"object","properties":{")" + name + R"(":)" + value_schema + R"(},"required":[")" + name +
              R"("],"additionalProperties":false})";
  return compile_constraint(spec, v);
}

// Walks `steps` random allowed tokens with a matcher whose cache evicts at
// every mask and one with the default cap, checks both against the
// reference, then rolls back and walks the same tokens again (every state
// reached twice) expecting the cached masks to be the same.
void check_caches(const std::shared_ptr<const CompiledGrammar>& g, const std::shared_ptr<const VocabIndex>& v,
                  std::mt19937& rng, int steps, const std::string& what) {
  Matcher cached(g, v), evicting(g, v);
  evicting.set_cache_limit(1);
  std::vector<std::vector<uint64_t>> first;
  std::vector<int32_t> path;
  for (int i = 0; i <= steps; ++i) {
    expect_reference(cached, *v, what + " step " + std::to_string(i));
    if (::testing::Test::HasFatalFailure()) return;
    first.push_back(copy(cached.mask()));
    ASSERT_EQ(copy(evicting.mask()), first.back()) << what << " step " << i;
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < v->vocab_size; ++t)
      if (t != v->eos_ids[0] && ((first.back()[t >> 6] >> (t & 63)) & 1)) allowed.push_back(t);
    if (allowed.empty() || i == steps) break;
    path.push_back(allowed[rng() % allowed.size()]);
    ASSERT_TRUE(cached.advance(path.back()));
    ASSERT_TRUE(evicting.advance(path.back()));
  }
  cached.rollback(cached.advances());
  const auto hits = cached.stats().mask_hits;
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_EQ(copy(cached.mask()), first[i]) << what << " again at step " << i;
    if (i < path.size()) {
      ASSERT_TRUE(cached.advance(path[i]));
    }
  }
  EXPECT_EQ(cached.stats().mask_hits - hits, static_cast<int64_t>(first.size())) << what;
  if (first.size() > 1) {
    EXPECT_GT(evicting.stats().evictions, 0) << what;
  }
}

TEST(ConstrainMaskCache, NestedGrammarsCutFramesAndMatchTheReference) {
  // Rules nested deeper than a frame (three stack entries), so frame walks
  // leave subtrees undecided and the real stacks decide them.
  const std::vector<std::string> units = {"a", "b", "(", ")", ",", "\xC3\xA9"};
  std::mt19937 rng(7);
  auto v = test_vocab(units, 150, rng);
  const char* grammars[] = {
      "root ::= list\nlist ::= \"(\" items? \")\"\nitems ::= item (\",\" item)*\nitem ::= list | word\nword ::= [ab\xC3\xA9]+\n",
      "root ::= x x\nx ::= \"(\" y \")\" | \"a\"\ny ::= z \",\" z\nz ::= [ab]* | x\n",
      "root ::= a\na ::= b \"b\"\nb ::= c \"a\"?\nc ::= \"(\" d* \")\"\nd ::= [a\xC3\xA9,]\n",
  };
  int64_t undecided = 0;
  for (const char* text : grammars) {
    auto g = std::make_shared<const CompiledGrammar>(compile_gbnf(text));
    for (int seed = 0; seed < 8; ++seed) {
      check_caches(g, v, rng, 14, text);
      if (HasFatalFailure()) return;
    }
    // A vocabulary with a cold frame cache (the same tokens), so this
    // matcher walks its frames itself.
    auto cold = VocabIndex::build(v->bytes, v->excluded, v->eos_ids);
    Matcher m(g, cold);
    for (int i = 0; i < 10; ++i) {
      auto mask = m.mask();
      int32_t pick = -1;
      for (int32_t t = 0; t < v->vocab_size && pick < 0; ++t)
        if (t != v->eos_ids[0] && ((mask[t >> 6] >> (t & 63)) & 1) && v->bytes[t] == "(") pick = t;
      if (pick < 0 || !m.advance(pick)) break;
    }
    undecided += m.stats().undecided;
  }
  EXPECT_GT(undecided, 0) << "no frame was cut: the test does not reach the undecided-subtree walk";
}

TEST(ConstrainMaskCache, OneStringFrameIsSharedAcrossObjects) {
  // The same unbounded string under two different parents: the second mask
  // inside a string reuses the first's frame and still equals the reference.
  const std::vector<std::string> units = {"{", "}", "\"", "a", "b", ":", ",", "\\", "\xE4\xB8\xAD"};
  std::mt19937 rng(3);
  auto base = test_vocab(units, 200, rng);
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::JsonSchema;
  spec.text = R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}},"required":["a","b"],"additionalProperties":false})";
  auto c = compile_constraint(spec, base);
  auto m = c->matcher();
  ASSERT_TRUE(m.advance_bytes(R"({"a":"ab)"));
  expect_reference(m, *base, "first string");
  const auto frames_before = m.stats().frame_hits;
  ASSERT_TRUE(m.advance_bytes(R"(ba","b":{"a":"b)"));
  expect_reference(m, *base, "second string");
  EXPECT_GT(m.stats().frame_hits, frames_before) << "the inner string did not share the outer string's frame";
  for (int seed = 0; seed < 6; ++seed) {
    check_caches(c->grammar, base, rng, 20, "schema");
    if (HasFatalFailure()) return;
  }
}

TEST(ConstrainMaskCache, FrameWalksAreSharedAcrossGrammarsOfOneVocabulary) {
  // Two schemas on one vocabulary: the second finds string frames (counted
  // and not) in the vocabulary's cache, named by structure, not rule
  // numbers. Its masks along a walk equal the reference and those of the
  // same schema on an identical vocabulary with a cold cache.
  const std::vector<std::string> units = {"{", "}", "\"", "a", "b", ":", ",", "\\", "\xE4\xB8\xAD", "1"};
  std::mt19937 r1(5), r2(5), rng(6);
  auto shared = test_vocab(units, 200, r1), cold = test_vocab(units, 200, r2);
  cold->frame_cache->claim_json_frames();  // no common JSON frames (json_frames.h): every walk its own
  shared->frame_cache->claim_json_frames();  // only what schema a leaves
  ConstraintSpec a, b;
  a.kind = b.kind = ConstraintSpec::Kind::JsonSchema;
  a.text = R"({"type":"object","properties":{"x":{"type":"string","maxLength":4},"y":{"type":"string"},"n":{"type":"integer"}},"required":["x","y","n"],"additionalProperties":false})";
  b.text = R"({"type":"object","properties":{"k":{"type":"integer"},"t":{"type":"string","minLength":2,"maxLength":7},"u":{"type":"string"}},"required":["t","k","u"],"additionalProperties":false})";
  auto ca = compile_constraint(a, shared);
  auto ma = ca->matcher();
  for (char ch : std::string(R"({"x":"ab","y":"b","n":1})")) {
    ma.mask();  // its frame walks go into the vocabulary's cache
    ASSERT_TRUE(ma.advance_bytes(std::string(1, ch))) << ch;
  }
  Matcher warm = compile_constraint(b, shared)->matcher();
  Matcher fresh = compile_constraint(b, cold)->matcher();
  for (const char* part : {"{\"k\":1", ",\"t\":\"", "a", "b\xE4", "\xB8\xAD", "ab", "a", "\",\"u\":\"", "b", "\"}"}) {
    ASSERT_EQ(copy(warm.mask()), copy(fresh.mask())) << "after " << warm.advances() << " parts";
    expect_reference(warm, *shared, "warm");
    if (HasFatalFailure()) return;
    ASSERT_TRUE(warm.advance_bytes(part)) << part;
    ASSERT_TRUE(fresh.advance_bytes(part)) << part;
  }
  EXPECT_GT(warm.stats().shared_hits, 0) << "no frame came from the vocabulary's cache";
  for (int seed = 0; seed < 4; ++seed) {
    check_caches(compile_constraint(b, shared)->grammar, shared, rng, 24, "schema b");
    if (HasFatalFailure()) return;
  }
}

TEST(ConstrainMaskCache, OneWalkServesEveryCountOfAStringInAnArray) {
  // A bounded string as the second item of a bounded array: its state holds
  // the string's stacks and one that already closed the string (into the
  // array's repetition). The split must be around the string, so every
  // count of it shares one frame walk; split around the array, each count
  // was a walk of its own. Masks equal the reference at every count.
  const std::vector<std::string> units = {"[", "]", "\"", "a", "b", ",", "\\", "\xE4\xB8\xAD"};
  std::mt19937 rng(11);
  auto v = test_vocab(units, 200, rng);
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::JsonSchema;
  spec.text = R"({"type":"array","items":{"type":"string","maxLength":6},"minItems":1,"maxItems":4})";
  auto m = compile_constraint(spec, v)->matcher();
  ASSERT_TRUE(m.advance_bytes(R"(["ab",")"));
  int64_t walks = -1;
  for (const char* ch : {"a", "b", "\xE4\xB8\xAD", "a", "b", "a"}) {
    ASSERT_TRUE(m.advance_bytes(ch)) << ch;
    expect_reference(m, *v, std::string("after ") + ch);
    if (HasFatalFailure()) return;
    const auto st = m.stats();
    if (walks < 0) walks = st.frame_masks - st.frame_hits;
    EXPECT_EQ(st.frame_masks - st.frame_hits, walks) << "a new frame walk at count " << m.advances() - 1;
  }
  for (int seed = 0; seed < 4; ++seed) {
    check_caches(compile_constraint(spec, v)->grammar, v, rng, 16, "array of strings");
    if (HasFatalFailure()) return;
  }
}

TEST(ConstrainMaskCache, LeavingACountedRepetitionByAFewBytesEqualsTheReference) {
  // An email's local part (atext{1,32}) is left by '.' or '@' only: the walk
  // below its escapes starts from the few trie nodes with those bytes
  // instead of every escape's children (most tokens here are atext, so the
  // candidates are fewer than the escapes). Every mask along walks through
  // the local part, the dots, the '@' and the domain equals the reference.
  const std::vector<std::string> units = {"ab", "c", "x1", "-", ".", "@", "\"", "{", "}", ":", "e"};
  std::mt19937 rng(13);
  auto v = test_vocab(units, 400, rng);
  auto c = one_property(v, "e", R"({"type":"string","format":"email"})");
  auto m = c->matcher();
  ASSERT_TRUE(m.advance_bytes(R"({"e":")"));
  for (const char* part : {"a", "b", "c", ".", "x", "1", "@", "a", "b", "-", "c", ".", "e"}) {
    expect_reference(m, *v, std::string("before ") + part);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(m.advance_bytes(part)) << part;
  }
  for (int seed = 0; seed < 4; ++seed) {
    check_caches(c->grammar, v, rng, 20, "email");
    if (HasFatalFailure()) return;
  }
}

TEST(ConstrainMaskCache, CountsFarFromTheBoundsShareOneMask) {
  // A string of 2 to 60 characters: between its least and its most a count
  // tells no token apart from the next count, so those counts' states share
  // one mask (computed once); near the bounds the masks differ. Every mask
  // equals the reference, and a matcher evicting at every mask agrees.
  const std::vector<std::string> units = {"a", "bc", "\"", "\\", "n", "\xE4\xB8\xAD", "}", ",", ":", "{"};
  std::mt19937 rng(23);
  auto v = test_vocab(units, 300, rng);
  auto c = one_property(v, "s", R"({"type":"string","minLength":2,"maxLength":60})");
  auto m = c->matcher();
  ASSERT_TRUE(m.advance_bytes(R"({"s":")"));
  std::vector<const uint64_t*> seen;
  for (int i = 0; i < 60; ++i) {
    expect_reference(m, *v, "at count " + std::to_string(i));
    if (HasFatalFailure()) return;
    seen.push_back(m.mask().data());
    ASSERT_TRUE(m.advance_bytes(i % 3 ? "a" : "\xE4\xB8\xAD"));
  }
  EXPECT_EQ(seen[20], seen[30]) << "counts far from both bounds did not share a mask";
  EXPECT_NE(seen[0], seen[30]) << "below the least count";
  EXPECT_NE(seen[59], seen[30]) << "at the most";
  for (int seed = 0; seed < 3; ++seed) {
    check_caches(c->grammar, v, rng, 40, "bounded string");
    if (HasFatalFailure()) return;
  }
}

TEST(ConstrainMaskCache, ALongIntegerIsOneParseNotOnePerLength) {
  // An integer with a minimum (1 to 16 digits): its lengths are one counted
  // repetition. As one alternative per length, each digit kept a parse per
  // longer length, each with a count of its own, and every digit's mask split
  // the state once per length (a dozen new states and masks per digit on
  // random output). Masks equal the reference at every digit.
  const std::vector<std::string> units = {"1", "23", "0", "9", ",", "}", "{", "\"", ":", "n"};
  std::mt19937 rng(19);
  auto v = test_vocab(units, 300, rng);
  auto m = one_property(v, "n", R"({"type":"integer","minimum":1})")->matcher();
  ASSERT_TRUE(m.advance_bytes(R"({"n":)"));
  for (const char* d : {"4", "3", "5", "3", "5", "4", "5", "7", "3", "1"}) {
    expect_reference(m, *v, std::string("before ") + d);
    if (HasFatalFailure()) return;
    const int64_t states = m.stats().states;
    ASSERT_TRUE(m.advance_bytes(d)) << d;
    m.mask();
    EXPECT_LE(m.stats().states - states, 4) << "parser states made by digit " << m.advances() - 1;
  }
}

TEST(ConstrainMaskCache, OneWalkServesEveryCountOfADomainLabel) {
  // Inside an email's second domain label two counted repetitions are alive:
  // the label's own characters ({0,61}) and the list of labels ({1,3})
  // below it, each on one stack. Split around the list, the label's count
  // sat inside the frame and every character was a new whole-trie walk
  // (random output wanders into long labels); split around the label, all
  // counts share one walk. Masks equal the reference at every count.
  const std::vector<std::string> units = {"ab", "c", "x1", "-", ".", "@", "\"", "{", "}", ":", "e"};
  std::mt19937 rng(17);
  auto v = test_vocab(units, 400, rng);
  auto m = one_property(v, "e", R"({"type":"string","format":"email"})")->matcher();
  ASSERT_TRUE(m.advance_bytes(R"({"e":"a@b.c)"));
  int64_t walks = -1;
  for (const char* ch : {"d", "e", "-", "f", "1", "g", "h", "-", "i"}) {
    ASSERT_TRUE(m.advance_bytes(ch)) << ch;
    expect_reference(m, *v, std::string("after ") + ch);
    if (HasFatalFailure()) return;
    const auto st = m.stats();
    if (walks < 0) walks = st.frame_masks - st.frame_hits;
    EXPECT_EQ(st.frame_masks - st.frame_hits, walks) << "a new frame walk at count " << m.advances() - 1;
  }
}

}  // namespace
}  // namespace pocket::constrain

namespace pocket::constrain {
namespace {

TEST(ConstrainMaskCache, CommonJsonFramesGiveTheMasksOfOwnWalks) {
  // The common JSON frames walked once per vocabulary (json_frames.h) against
  // a vocabulary without them: schemas of those kinds in other places (root,
  // array items, nested objects, other bounds) find walks in the cache, and
  // every mask along random walks equals the cold vocabulary's and the
  // reference.
  const std::vector<std::string> units = {"{", "}", "[", "]", "\"", "a", "B", ":", ",", "\\", "\xE4\xB8\xAD", "1", "0",
                                          "-", ".", "e", "@", "T", "Z", "+"};
  std::mt19937 r1(7), r2(7), rng(8);
  auto warm = test_vocab(units, 300, r1), cold = test_vocab(units, 300, r2);
  ASSERT_TRUE(cold->frame_cache->claim_json_frames());
  ASSERT_TRUE(warm_json_frames(warm));
  EXPECT_FALSE(warm_json_frames(warm)) << "the pass ran twice";
  const char* schemas[] = {
      R"({"type":"object","properties":{"n":{"type":"string","maxLength":9},"m":{"type":"string","format":"email"},"d":{"type":"string","format":"date-time"},"x":{"type":"number"}},"required":["n","m","d","x"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"object","properties":{"t":{"type":"string","minLength":2,"maxLength":5},"i":{"type":"integer"}},"required":["t","i"],"additionalProperties":false},"maxItems":3})",
      R"({"type":"object","properties":{"o":{"type":"object","additionalProperties":{"type":"string"}},"u":{"type":"string","format":"uuid"}},"required":["o","u"]})",
      R"({"type":"string","format":"email"})",
  };
  int64_t warm_hits = 0, cold_hits = 0;  // frames found in the vocabulary's cache
  for (const char* text : schemas) {
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::JsonSchema;
    spec.text = text;
    auto gw = compile_constraint(spec, warm), gc = compile_constraint(spec, cold);
    for (int seed = 0; seed < 3; ++seed) {
      Matcher mw = gw->matcher(), mc = gc->matcher();
      for (int step = 0; step < 24; ++step) {
        const auto mask = copy(mw.mask());
        ASSERT_EQ(mask, copy(mc.mask())) << text << " step " << step;
        expect_reference(mw, *warm, text);
        if (HasFatalFailure()) return;
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < warm->vocab_size; ++t)
          if (t != warm->eos_ids[0] && ((mask[t >> 6] >> (t & 63)) & 1)) allowed.push_back(t);
        if (allowed.empty()) break;
        const int32_t t = allowed[rng() % allowed.size()];
        ASSERT_TRUE(mw.advance(t));
        ASSERT_TRUE(mc.advance(t));
      }
      warm_hits += mw.stats().shared_hits;
      cold_hits += mc.stats().shared_hits;
    }
  }
  EXPECT_GT(warm_hits, cold_hits) << "no schema found a common frame";
}

TEST(ConstrainMaskCache, ACopiedCacheServesTheSameFramesAndKeepsItsOwnInserts) {
  // FrameCache::copy: a vocabulary whose cache is a copy of a warm one finds
  // the common JSON frames without walking them again (the claim is copied),
  // gives the masks of a cold vocabulary, and the frames its own walks add
  // stay in the copy: the original's size does not move.
  const std::vector<std::string> units = {"{", "}", "\"", "a", "B", ":", ",", "\\", "1", "-", "."};
  std::mt19937 r1(9), r2(9);
  auto warm = test_vocab(units, 200, r1), cold = test_vocab(units, 200, r2);
  ASSERT_TRUE(cold->frame_cache->claim_json_frames());
  ASSERT_TRUE(warm_json_frames(warm));
  const size_t warm_bytes = warm->frame_cache->bytes();
  ASSERT_GT(warm_bytes, 0u);
  auto copied = std::make_shared<VocabIndex>(*warm);
  copied->frame_cache = warm->frame_cache->copy();
  EXPECT_EQ(copied->frame_cache->bytes(), warm_bytes);
  EXPECT_FALSE(warm_json_frames(copied)) << "the copy lost the claim and walked the common frames again";
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::JsonSchema;
  spec.text = R"({"type":"object","properties":{"s":{"type":"string"},"n":{"type":"integer"}},"required":["s","n"],"additionalProperties":false})";
  Matcher mc = compile_constraint(spec, copied)->matcher(), mo = compile_constraint(spec, cold)->matcher();
  for (char ch : std::string(R"({"s":"aB\"1","n":-12})")) {
    ASSERT_EQ(copy(mc.mask()), copy(mo.mask())) << "before " << ch;
    ASSERT_TRUE(mc.advance_bytes(std::string(1, ch))) << ch;
    ASSERT_TRUE(mo.advance_bytes(std::string(1, ch))) << ch;
  }
  ASSERT_EQ(copy(mc.mask()), copy(mo.mask()));
  EXPECT_TRUE(mc.accepting());
  EXPECT_GT(mc.stats().shared_hits, 0) << "no frame came from the copied cache";
  EXPECT_GT(copied->frame_cache->bytes(), warm_bytes) << "the walk added no frame (the test proves nothing)";
  EXPECT_EQ(warm->frame_cache->bytes(), warm_bytes) << "an insert into the copy reached the original";
}

}  // namespace
}  // namespace pocket::constrain

namespace pocket::constrain {
namespace {

TEST(ConstrainVocabIndex, RootChildrenByByteAgreeWithThePreorder) {
  // root_child (the frame walks start only at the first bytes a state
  // accepts) against a plain scan of the trie's depth-1 nodes.
  const std::vector<std::string> units = {"\xFF", "\x80", "a", "ab", "\"", std::string(1, '\0'), "\xE4\xB8\xAD", " "};
  std::mt19937 rng(29);
  auto v = test_vocab(units, 300, rng);
  std::vector<int32_t> expect(256, -1);
  for (size_t i = 0; i < v->node_byte.size(); ++i)
    if (v->node_depth[i] == 1) {
      EXPECT_EQ(expect[v->node_byte[i]], -1) << "two root children with byte " << int(v->node_byte[i]);
      expect[v->node_byte[i]] = static_cast<int32_t>(i);
    }
  EXPECT_EQ(v->root_child, expect);
  EXPECT_GE(v->root_child[0xFF], 0);
  EXPECT_GE(v->root_child[0x80], 0);
}

}  // namespace
}  // namespace pocket::constrain
