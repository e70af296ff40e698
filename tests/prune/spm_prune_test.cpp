// Vocabulary pruning of SentencePiece BPE with byte fallback (issue 17):
// parents by score on a hand-made vocabulary, then the guarantees on
// llama2.c's tok512 (a real SentencePiece vocabulary with <0xNN> tokens):
// (1) every string round-trips, (2) kept-only text encodes identically,
// closure under ancestry; (3) and (4) on a model file are in
// model_test.cpp and gemma3_prune_test.cpp.
#include <gtest/gtest.h>

#include <random>

#include "common/test_util.h"
#include "prune/corpus_stats.h"
#include "prune/prune_fixture.h"
#include "prune/vocab_prune.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// <unk> <s> </s>, the 256 <0xNN> byte tokens, then `pieces` (normal, with
// their scores), then one user-defined piece "<mask>". No space prefix (as
// Gemma).
Vocab make_spm(const std::vector<std::pair<std::string, float>>& pieces) {
  Vocab v;
  v.kind = TokenizerKind::SentencePieceBPE;
  auto add = [&](std::string t, TokenType type, float score) {
    v.tokens.push_back(std::move(t));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", TokenType::Unknown, 0);
  add("<s>", TokenType::Control, 0);
  add("</s>", TokenType::Control, 0);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, TokenType::Byte, 0);
  }
  for (const auto& [p, s] : pieces) add(p, TokenType::Normal, s);
  add("<mask>", TokenType::UserDefined, 0);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.eos_ids = {2};
  return v;
}

int32_t id_of(const Vocab& v, const std::string& piece) {
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == piece) return static_cast<int32_t>(i);
  return -1;
}

// "abc": (b, c) scores higher than (a, b), so the tokenizer makes "bc" first
// and its parents are (a, bc), whatever other ways exist to spell it.
Vocab abc_vocab() {
  return make_spm({{"a", -1}, {"b", -1}, {"c", -1}, {"y", -1}, {kSpace, -1}, {"ab", -3}, {"bc", -2}, {"abc", -4},
                   {"xy", -5}, {kSpace + "a", -6}, {kSpace + "ab", -7}});
}

using test::mapped;

TEST(PruneSentencePiece, ParentsAreTheLastMergeByScore) {
  const Vocab v = abc_vocab();
  const auto parents = prune::bpe_parents(v);
  using P = std::array<int32_t, 2>;
  EXPECT_EQ(parents[id_of(v, "abc")], (P{id_of(v, "a"), id_of(v, "bc")}));
  EXPECT_EQ(parents[id_of(v, "ab")], (P{id_of(v, "a"), id_of(v, "b")}));
  // "x" has no token (byte fallback): that side needs nothing kept.
  EXPECT_EQ(parents[id_of(v, "xy")], (P{-1, id_of(v, "y")}));
  // The space is spelled U+2581 in pieces and matched as ' ' in text. On
  // " ab" the tokenizer merges (a, b) at -3 before (▁, a) at -6, so "▁ab"
  // comes from (▁, ab) although "▁a" + "b" spells it too.
  EXPECT_EQ(parents[id_of(v, kSpace + "ab")], (P{id_of(v, kSpace), id_of(v, "ab")}));
  EXPECT_EQ(parents[id_of(v, kSpace + "a")], (P{id_of(v, kSpace), id_of(v, "a")}));
  for (const char* p : {"a", "<0x41>", "<s>", "<mask>"}) EXPECT_EQ(parents[id_of(v, p)], (P{-1, -1})) << p;
  // The byte tokens are the <0xNN> pieces.
  const auto bytes = prune::byte_tokens(v);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(bytes[b], 3 + b);
}

TEST(PruneSentencePiece, KeepingATokenKeepsItsAncestryAndTheIdentityHolds) {
  const Vocab v = abc_vocab();
  const auto before = Tokenizer::create(v);
  std::vector<uint64_t> counts(v.tokens.size(), 0);
  counts[id_of(v, "abc")] = 10;
  prune::SelectOptions opt;
  opt.min_count = 1;
  opt.keep = 1000;
  const auto sel = prune::select_tokens(v, prune::bpe_parents(v), counts, opt);
  for (const char* p : {"abc", "a", "bc", "b", "c", "<mask>", "<0x00>", "<0xFF>", "<unk>", "</s>"})
    EXPECT_TRUE(sel.kept[id_of(v, p)]) << p;
  for (const std::string& p : {std::string("ab"), std::string("xy"), kSpace + "ab"}) EXPECT_FALSE(sel.kept[id_of(v, p)]) << p;
  EXPECT_EQ(sel.total, 3 + 256 + 1 + 5);  // specials, bytes, <mask>, abc a bc b c
  const auto p = prune::apply_selection(v, sel.kept);
  EXPECT_TRUE(p.vocab.merges.empty());
  const auto after = Tokenizer::create(p.vocab);
  EXPECT_EQ(after->encode("abcabc"), mapped(before->encode("abcabc"), p.old_to_new));
  // Dropped pieces fall back: "ab" as a then b, "xy" as bytes.
  EXPECT_EQ(after->decode(after->encode("ab xy<mask>")), "ab xy<mask>");
  EXPECT_EQ(after->encode("<mask>"), (std::vector<int32_t>{p.old_to_new[id_of(v, "<mask>")]}));
  EXPECT_EQ(after->encode("xy").size(), 2u);

  // Without "bc" (not closed under ancestry) the same text changes: nothing
  // builds "abc" any more.
  std::vector<uint8_t> broken = sel.kept;
  broken[id_of(v, "bc")] = 0;
  const auto q = prune::apply_selection(v, broken);
  EXPECT_NE(Tokenizer::create(q.vocab)->encode("abc"), mapped(before->encode("abc"), q.old_to_new));
}

TEST(PruneSentencePiece, WithoutByteFallbackItIsAClearError) {
  Vocab v = abc_vocab();
  v.types[3 + 0x41] = TokenType::Normal;  // <0x41> and <0x05> are no longer byte tokens
  v.types[3 + 0x05] = TokenType::Normal;
  try {
    prune::bpe_parents(v);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no <0x05> token"), std::string::npos) << e.what();
  }
}

// tok512 pruned to 320 tokens on the English training split: (1) and (2).
struct Tok512 {
  std::shared_ptr<const Tokenizer> before, after;
  prune::PrunedVocab pruned;
  std::vector<std::array<int32_t, 2>> parents;
};

const Tok512& tok512() {
  static const Tok512 t = [] {
    Tok512 r;
    const Vocab v = vocab_from_llama2c(test::stories_tokenizer(), 512);
    r.before = Tokenizer::create(v);
    std::vector<prune::Corpus> corpus;
    corpus.push_back(prune::Corpus::read(test::corpus_file("train_en")));
    const auto counts = prune::count_tokens(*r.before, corpus, 2);
    prune::SelectOptions opt;
    opt.keep = 320;
    r.parents = prune::bpe_parents(v);
    const auto sel = prune::select_tokens(v, r.parents, counts, opt);
    r.pruned = prune::apply_selection(v, sel.kept);
    r.after = Tokenizer::create(r.pruned.vocab);
    return r;
  }();
  return t;
}

TEST(PruneSentencePiece, Tok512KeepsTheBudgetBytesSpecialsAndAncestry) {
  const auto& t = tok512();
  EXPECT_EQ(t.after->vocab_size(), 320);
  const Vocab& v = t.before->vocab();
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] != TokenType::Normal) {
      EXPECT_GE(t.pruned.old_to_new[i], 0) << v.tokens[i];
    }
  int with_parents = 0;
  for (int32_t old : t.pruned.new_to_old)
    for (int32_t parent : t.parents[static_cast<size_t>(old)])
      if (parent >= 0) {
        ++with_parents;
        EXPECT_GE(t.pruned.old_to_new[static_cast<size_t>(parent)], 0) << v.tokens[old];
      }
  EXPECT_GT(with_parents, 50);
  EXPECT_EQ(t.after->vocab().bos_id, t.pruned.old_to_new[v.bos_id]);
  EXPECT_EQ(t.after->vocab().eos_id, t.pruned.old_to_new[v.eos_id]);
  EXPECT_EQ(t.after->vocab().unk_id, t.pruned.old_to_new[v.unk_id]);
}

TEST(PruneSentencePiece, Tok512HeldOutTextRoundTripsAndKeptOnlyTextIsIdentical) {
  const auto& t = tok512();
  const auto corpus = prune::Corpus::read(test::corpus_file("heldout_en"));
  const auto s = prune::compare_tokenizers(*t.before, *t.after, t.pruned.old_to_new, corpus, 2);
  EXPECT_GT(s.docs, 1000u);
  EXPECT_GT(s.docs_all_kept, 100u) << "too few kept-only documents to test anything";
  EXPECT_EQ(s.docs_all_kept_identical, s.docs_all_kept);
  EXPECT_EQ(s.docs_round_trip, s.docs);
  EXPECT_GE(s.tokens_after, s.tokens_before);
}

TEST(PruneSentencePiece, Tok512RandomStringsRoundTrip) {
  const auto& t = tok512();
  std::mt19937 rng(17);
  const std::vector<std::string> alphabet = {"a", "e", "t", " ", "  ", "\n", "Once", " upon", "的", "é", "\xF0\x9F\x98\x80",
                                             "\xFF", "\x80", "<s>", "</s>", "0", "9", ".", "th", "ing"};
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    const auto before = t.before->encode(s), after = t.after->encode(s);
    ASSERT_EQ(t.after->decode(after), t.before->decode(before)) << "case " << i;
    bool kept = true;
    for (int32_t id : before) kept = kept && t.pruned.old_to_new[static_cast<size_t>(id)] >= 0;
    if (kept) {
      ASSERT_EQ(after, mapped(before, t.pruned.old_to_new)) << "case " << i;
    }
  }
}

}  // namespace
}  // namespace pocket
