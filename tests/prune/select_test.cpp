// The selection rules on small hand-made byte-level vocabularies: canonical
// BPE parents, closure under ancestry, the budget, which merges survive.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "prune/vocab_prune.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

namespace pocket {
namespace {

// Byte-level piece of raw text.
std::string piece(std::string_view raw) {
  std::string out;
  for (unsigned char b : raw) utf8::append(out, byte_level::kByteToCp[b]);
  return out;
}

// 256 byte tokens (in byte order), then `extra` tokens, then one control
// token; merges given as raw (left, right) text pairs in rank order.
Vocab make_vocab(const std::vector<std::string>& extra, const std::vector<std::pair<std::string, std::string>>& merges) {
  Vocab v;
  v.kind = TokenizerKind::ByteLevelBPE;
  v.pre = PreTokenizer::Qwen2;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(piece(std::string(1, static_cast<char>(b))));
    v.types.push_back(TokenType::Normal);
  }
  for (const auto& e : extra) {
    v.tokens.push_back(piece(e));
    v.types.push_back(TokenType::Normal);
  }
  v.tokens.push_back("<|end|>");
  v.types.push_back(TokenType::Control);
  v.eos_id = static_cast<int32_t>(v.tokens.size()) - 1;
  v.eos_ids = {v.eos_id};
  for (const auto& [a, b] : merges) v.merges.emplace_back(piece(a), piece(b));
  return v;
}

int32_t id_of_text(const Vocab& v, std::string_view raw) {
  const std::string p = piece(raw);
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == p) return static_cast<int32_t>(i);
  return -1;
}

// "abc" is made by two merges, (ab, c) listed first and (a, bc); BPE on
// "abc" merges (b, c) first (rank 0), so its real parents are (a, bc).
Vocab two_ways_vocab() {
  return make_vocab({"bc", "ab", "abc", "xy"}, {{"b", "c"}, {"a", "b"}, {"ab", "c"}, {"a", "bc"}, {"x", "y"}});
}

TEST(PruneSelect, ParentsAreTheLastMergeBpeApplies) {
  const Vocab v = two_ways_vocab();
  const auto parents = prune::bpe_parents(v);
  const std::array<int32_t, 2> a_bc{id_of_text(v, "a"), id_of_text(v, "bc")};
  EXPECT_EQ(parents[id_of_text(v, "abc")], a_bc);
  const std::array<int32_t, 2> a_b{id_of_text(v, "a"), id_of_text(v, "b")};
  EXPECT_EQ(parents[id_of_text(v, "ab")], a_b);
  const std::array<int32_t, 2> none{-1, -1};
  EXPECT_EQ(parents[id_of_text(v, "a")], none);
  EXPECT_EQ(parents[v.eos_id], none);
}

TEST(PruneSelect, ClosedUnderAncestryAndCountedInTheBudget) {
  const Vocab v = two_ways_vocab();
  const auto parents = prune::bpe_parents(v);
  std::vector<uint64_t> counts(v.tokens.size(), 0);
  counts[id_of_text(v, "abc")] = 100;  // its parent "bc" is never a final token
  counts[id_of_text(v, "ab")] = 50;
  counts[id_of_text(v, "xy")] = 10;
  prune::SelectOptions so;
  so.keep = 257 + 2;  // bytes + <|end|>, then room for abc with bc only
  so.min_count = 1;
  const auto sel = prune::select_tokens(v, parents, counts, so);
  EXPECT_EQ(sel.mandatory, 257);
  EXPECT_EQ(sel.total, 259);
  EXPECT_TRUE(sel.kept[id_of_text(v, "abc")]);
  EXPECT_TRUE(sel.kept[id_of_text(v, "bc")]);
  EXPECT_FALSE(sel.kept[id_of_text(v, "ab")]);  // no room left
  EXPECT_FALSE(sel.kept[id_of_text(v, "xy")]);
  // One more slot: "ab" (count 50) fits before "xy" (count 10).
  so.keep = 260;
  const auto sel2 = prune::select_tokens(v, parents, counts, so);
  EXPECT_TRUE(sel2.kept[id_of_text(v, "ab")]);
  EXPECT_FALSE(sel2.kept[id_of_text(v, "xy")]);
}

TEST(PruneSelect, ATokenWhoseAncestorsDoNotFitIsSkipped) {
  const Vocab v = two_ways_vocab();
  std::vector<uint64_t> counts(v.tokens.size(), 0);
  counts[id_of_text(v, "abc")] = 100;  // needs 2 slots
  counts[id_of_text(v, "xy")] = 10;    // needs 1
  prune::SelectOptions so;
  so.keep = 258;
  so.min_count = 1;
  const auto sel = prune::select_tokens(v, prune::bpe_parents(v), counts, so);
  EXPECT_FALSE(sel.kept[id_of_text(v, "abc")]);
  EXPECT_FALSE(sel.kept[id_of_text(v, "bc")]);
  EXPECT_TRUE(sel.kept[id_of_text(v, "xy")]);
  EXPECT_EQ(sel.total, 258);
}

TEST(PruneSelect, UnseenTokensFillTheRestUnlessMinCountIsSet) {
  const Vocab v = two_ways_vocab();
  std::vector<uint64_t> counts(v.tokens.size(), 0);
  prune::SelectOptions so;
  so.keep = 1000;
  const auto all = prune::select_tokens(v, prune::bpe_parents(v), counts, so);
  EXPECT_EQ(all.total, static_cast<int64_t>(v.tokens.size()));
  so.min_count = 1;
  EXPECT_EQ(prune::select_tokens(v, prune::bpe_parents(v), counts, so).total, 257);
}

TEST(PruneSelect, KeepSmallerThanTheMandatorySetIsAClearError) {
  const Vocab v = two_ways_vocab();
  prune::SelectOptions so;
  so.keep = 200;
  so.must_keep = {id_of_text(v, "abc")};
  try {
    prune::select_tokens(v, prune::bpe_parents(v), std::vector<uint64_t>(v.tokens.size(), 0), so);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--keep 200 is smaller than the mandatory set: 259"), std::string::npos)
        << e.what();
  }
}

TEST(PruneSelect, MergesSurviveOnlyWithBothPartsAndTheResult) {
  const Vocab v = two_ways_vocab();
  std::vector<uint8_t> kept(v.tokens.size(), 1);
  kept[id_of_text(v, "ab")] = 0;
  const auto p = prune::apply_selection(v, kept);
  ASSERT_EQ(p.vocab.merges.size(), 3u);
  EXPECT_EQ(p.vocab.merges[0], std::make_pair(piece("b"), piece("c")));
  EXPECT_EQ(p.vocab.merges[1], std::make_pair(piece("a"), piece("bc")));
  EXPECT_EQ(p.vocab.merges[2], std::make_pair(piece("x"), piece("y")));
  EXPECT_EQ((std::vector<uint8_t>{1, 0, 0, 1, 1}), p.merge_kept);
  // Ids are dense, in the original order; the control token follows.
  EXPECT_EQ(p.vocab.tokens.size(), v.tokens.size() - 1);
  EXPECT_EQ(p.old_to_new[id_of_text(v, "ab")], -1);
  EXPECT_EQ(p.old_to_new[id_of_text(v, "abc")], id_of_text(v, "abc") - 1);
  EXPECT_EQ(p.vocab.eos_id, v.eos_id - 1);
  for (size_t n = 0; n < p.new_to_old.size(); ++n) EXPECT_EQ(p.old_to_new[p.new_to_old[n]], static_cast<int32_t>(n));
  // Text whose tokens are kept encodes the same; "ab" falls back to bytes.
  auto before = Tokenizer::create(v);
  auto after = Tokenizer::create(p.vocab);
  EXPECT_EQ(after->encode("abc xy"), (std::vector<int32_t>{p.old_to_new[id_of_text(v, "abc")], p.old_to_new[' '],
                                                           p.old_to_new[id_of_text(v, "xy")]}));
  EXPECT_EQ(before->encode("ab"), (std::vector<int32_t>{id_of_text(v, "ab")}));
  EXPECT_EQ(after->encode("ab"), (std::vector<int32_t>{'a', 'b'}));
  // The map file says the same.
  const auto map = nlohmann::json::parse(prune::id_map_json(p));
  EXPECT_EQ(map["new_to_old"].get<std::vector<int32_t>>(), p.new_to_old);
  EXPECT_EQ(map["old_to_new"].get<std::vector<int32_t>>(), p.old_to_new);
}

// SentencePiece BPE is pruned too (spm_prune_test.cpp), but only with byte
// fallback (<0xNN> tokens) and one score per token.
TEST(PruneSelect, SentencePieceVocabulariesNeedByteFallbackAndScores) {
  Vocab v = two_ways_vocab();
  v.kind = TokenizerKind::SentencePieceBPE;
  EXPECT_THROW(prune::apply_selection(v, std::vector<uint8_t>(v.tokens.size(), 1)), Error);  // no scores
  v.scores.assign(v.tokens.size(), 0.0f);
  EXPECT_THROW(prune::bpe_parents(v), Error);  // no <0xNN> tokens
}

TEST(PruneSelect, AVocabularyWithoutEveryByteIsRejected) {
  Vocab v = two_ways_vocab();
  v.tokens[7] = piece("zz");  // byte 7 has no token now
  try {
    prune::byte_tokens(v);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no token for byte 0x7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pocket
