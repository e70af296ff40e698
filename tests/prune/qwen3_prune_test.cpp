// The guarantees of issue 16 on the real Qwen3 vocabulary pruned to 24,000
// tokens (counted on training text, checked on the held-out split):
// (1) every string round-trips, (2) kept-only text encodes identically,
// (4) chat templates and special tokens encode the same (mapped).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "generate/chat.h"
#include "prune/prune_fixture.h"
#include "tokenizer/unicode.h"
#include "util/mapped_file.h"
#include "util/utf8.h"

namespace pocket {
namespace {

using test::pruned_qwen3;

using test::mapped;

TEST(PruneQwen3, KeepsTheBudgetAndEveryMandatoryToken) {
  const auto& p = pruned_qwen3();
  EXPECT_EQ(p.after->vocab_size(), p.keep);
  const Vocab& v = p.before->vocab();
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] != TokenType::Normal) {
      EXPECT_GE(p.pruned.old_to_new[i], 0) << v.tokens[i];
    }
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const auto ids = p.after->encode(byte);
    ASSERT_EQ(ids.size(), 1u) << b;
    EXPECT_EQ(p.after->token_bytes(ids[0]), byte);
  }
  // Closed under ancestry: both parents of every kept token are kept.
  const auto parents = prune::bpe_parents(v);
  for (int32_t old : p.pruned.new_to_old)
    for (int32_t parent : parents[static_cast<size_t>(old)])
      if (parent >= 0) {
        EXPECT_GE(p.pruned.old_to_new[static_cast<size_t>(parent)], 0) << v.tokens[old];
      }
}

// (2) on the whole held-out corpus, and (1) on it too.
TEST(PruneQwen3, KeptOnlyHeldOutTextEncodesIdentically) {
  const auto& p = pruned_qwen3();
  for (const char* name : {"heldout_zh", "heldout_en"}) {
    const auto corpus = prune::Corpus::read(test::corpus_file(name));
    const auto s = prune::compare_tokenizers(*p.before, *p.after, p.pruned.old_to_new, corpus, 2);
    EXPECT_GT(s.docs, 1000u) << name;
    EXPECT_GT(s.docs_all_kept, s.docs / 10) << name << ": too few kept-only documents to test anything";
    EXPECT_EQ(s.docs_all_kept_identical, s.docs_all_kept) << name;
    EXPECT_EQ(s.docs_round_trip, s.docs) << name;
    EXPECT_GE(s.tokens_after, s.tokens_before) << name;
  }
}

// (2) and (1) on the tokenizer test corpus (tests/data/tokenizer/corpus.json:
// mixed scripts, emoji, whitespace runs, special tokens in text), with and
// without special-token matching.
TEST(PruneQwen3, TheTokenizerTestCorpusToo) {
  const auto& p = pruned_qwen3();
  const auto corpus = nlohmann::json::parse(read_text_file(test::test_data_dir() + "/tokenizer/corpus.json"));
  size_t all_kept = 0;
  for (const auto& item : corpus) {
    const std::string text = item.get<std::string>();
    for (bool special : {false, true}) {
      const auto before = p.before->encode(text, {.allow_special = special});
      const auto after = p.after->encode(text, {.allow_special = special});
      EXPECT_EQ(p.after->decode(after), p.before->decode(before)) << text;
      bool kept = true;
      for (int32_t id : before) kept = kept && p.pruned.old_to_new[static_cast<size_t>(id)] >= 0;
      if (!kept) continue;
      ++all_kept;
      EXPECT_EQ(mapped(before, p.pruned.old_to_new), after) << text;
    }
  }
  EXPECT_GT(all_kept, corpus.size() / 2);
}

// The same check must fail when the kept set is not closed under ancestry:
// the most frequent tokens alone leave tokens whose parents were dropped
// (e.g. the two-byte halves of CJK characters, rarely final tokens).
TEST(PruneQwen3, WithoutAncestryTheIdentityBreaks) {
  const auto& p = pruned_qwen3();
  const Vocab& v = p.before->vocab();
  std::vector<uint8_t> kept(v.tokens.size(), 0);
  for (int32_t b : prune::byte_tokens(v)) kept[static_cast<size_t>(b)] = 1;
  std::vector<int32_t> order;
  int64_t n = 0;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != TokenType::Normal) kept[i] = 1;
    if (kept[i]) ++n;
    else order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p.counts[a] > p.counts[b]; });
  for (size_t k = 0; n < p.keep && k < order.size(); ++k, ++n) kept[order[k]] = 1;
  const auto naive = prune::apply_selection(v, kept);
  const auto tok = Tokenizer::create(naive.vocab);
  const auto corpus = prune::Corpus::read(test::corpus_file("heldout_zh"));
  const auto s = prune::compare_tokenizers(*p.before, *tok, naive.old_to_new, corpus, 2);
  EXPECT_LT(s.docs_all_kept_identical, s.docs_all_kept);
}

// (1) on strings no corpus has: random bytes (invalid UTF-8 included),
// random code points, runs.
TEST(PruneQwen3, EveryStringRoundTrips) {
  const auto& p = pruned_qwen3();
  test::Rng rng(16);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng.next() % 60);
    const uint64_t kind = rng.next() % 3;
    for (int k = 0; k < len; ++k) {
      if (kind == 0) {
        s.push_back(static_cast<char>(rng.next() & 0xff));
      } else if (kind == 1) {
        uint32_t cp = static_cast<uint32_t>(rng.next() % 0x110000);
        if (cp >= 0xD800 && cp < 0xE000) cp = 0x4E2D;
        utf8::append(s, cp);
      } else {
        s += " \n\t中文テキストabc123,.!"[rng.next() % 24];
      }
    }
    const auto ids = p.after->encode(s);
    for (int32_t id : ids) ASSERT_LT(id, p.after->vocab_size());
    ASSERT_EQ(p.after->decode(ids), unicode::nfc(s)) << "case " << i;
  }
}

// (4) The chat template renders and encodes to the same (mapped) sequence;
// special tokens keep their meaning.
TEST(PruneQwen3, ChatTemplateAndSpecialTokensEncodeTheSame) {
  const auto& p = pruned_qwen3();
  const Vocab& v = p.before->vocab();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == TokenType::Normal) continue;
    const auto id = p.after->token_id(v.tokens[i]);
    ASSERT_TRUE(id.has_value()) << v.tokens[i];
    EXPECT_EQ(*id, p.pruned.old_to_new[i]);
    EXPECT_EQ(p.after->is_control(*id), p.before->is_control(static_cast<int32_t>(i)));
    EXPECT_EQ(p.after->encode(v.tokens[i], {.allow_special = true}), (std::vector<int32_t>{*id}));
  }
  EXPECT_EQ(mapped(v.eos_ids, p.pruned.old_to_new), p.after->vocab().eos_ids);
  // Message texts whose own tokens are kept (the template's structure is
  // what is under test; other text legitimately encodes differently).
  std::vector<std::string> texts;
  for (const char* t : {"", "Hello", "You are a helpful assistant.", "你好，请介绍一下你自己。", "好的。",
                        "What is the weather like today?", "1+1=2", "这家酒店的服务很好", "The news today.", "我们的",
                        "谢谢！", " the world"}) {
    bool kept = true;
    for (int32_t id : p.before->encode(t)) kept = kept && p.pruned.old_to_new[static_cast<size_t>(id)] >= 0;
    if (kept) texts.push_back(t);
  }
  ASSERT_GE(texts.size(), 6u);
  const ChatTemplate tmpl(ChatFormat::Qwen3);
  for (size_t k = 0; k + 3 < texts.size(); ++k) {
    const std::vector<std::vector<ChatMessage>> convos = {
        {{"user", texts[k]}},
        {{"system", texts[k]}, {"user", texts[k + 1]}, {"assistant", texts[k + 2]}, {"user", texts[k + 3]}},
    };
    for (const auto& convo : convos)
      for (bool thinking : {true, false}) {
        ChatOptions co;
        co.enable_thinking = thinking;
        const auto pieces = tmpl.render(convo, co);
        const auto before = encode_pieces(*p.before, pieces);
        const auto after = encode_pieces(*p.after, pieces);
        for (int32_t id : before) ASSERT_GE(p.pruned.old_to_new[static_cast<size_t>(id)], 0) << pieces_text(pieces);
        EXPECT_EQ(mapped(before, p.pruned.old_to_new), after) << pieces_text(pieces);
      }
  }
}

}  // namespace
}  // namespace pocket
