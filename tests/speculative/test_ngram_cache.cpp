// The n-gram cache file of the lookup drafter: what it stores and keeps
// under its size bound, the file round trip, one clear error for every
// truncation, garbage, a damaged checksum, a foreign vocabulary and ids out
// of range, and greedy output with a cache equal to plain decoding while
// the cache's drafts are accepted.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "formats/format_test_util.h"
#include "runtime/loader.h"
#include "speculative/drafter.h"
#include "speculative/ngram_cache.h"
#include "speculative/speculative.h"
#include "util/error.h"
#include "util/hash64.h"

namespace pocket {
namespace {

std::vector<int32_t> ids(std::initializer_list<int32_t> v) { return v; }

TEST(NgramCache, KeepsTheMostFrequentContinuationAndTheMostFrequentContexts) {
  NgramCache c(100, 2, 3);
  c.add(ids({1, 2, 3, 4, 5}));
  c.add(ids({1, 2, 7, 8}));
  c.add(ids({1, 2, 7, 9, 9}));
  EXPECT_EQ(std::vector<int32_t>(c.lookup(ids({5, 1, 2}), 8).begin(), c.lookup(ids({5, 1, 2}), 8).end()),
            ids({7, 9, 9}))  // 7 follows "1 2" twice, 3 once; of 7's continuations the longest is kept
      << "most frequent next token";
  EXPECT_EQ(c.lookup(ids({5, 1, 2}), 1).size(), 1u);
  EXPECT_TRUE(c.lookup(ids({2}), 4).empty()) << "history shorter than n";
  EXPECT_TRUE(c.lookup(ids({9, 9, 9}), 4).empty());
  EXPECT_EQ(c.size(), 5u);  // contexts with a next token: 12 23 34 27 79
  c.prune(1);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_FALSE(c.lookup(ids({1, 2}), 4).empty()) << "the most frequent context survives the bound";
  EXPECT_THROW(c.add(ids({1, 100})), Error);
  EXPECT_THROW(NgramCache(100, 0, 3), Error);
  EXPECT_THROW(NgramCache(100, 2, NgramCache::kMaxCont + 1), Error);
}

TEST(NgramCache, FileRoundTripAndOneClearErrorPerDamage) {
  test::TempDir dir;
  NgramCache c(50, 3, 4);
  std::vector<int32_t> seq;
  for (int i = 0; i < 120; ++i) seq.push_back((i * 7 + i / 5) % 50);
  c.add(seq);
  c.prune(40);
  const std::string path = dir.file("c.ngram");
  c.save(path);
  const NgramCache back = NgramCache::load(path, 50);
  EXPECT_EQ(back.size(), c.size());
  for (size_t i = 3; i <= seq.size(); ++i) {
    const std::span<const int32_t> h(seq.data(), i);
    const auto a = c.lookup(h, 8), b = back.lookup(h, 8);
    EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), std::vector<int32_t>(b.begin(), b.end())) << i;
  }
  const std::vector<uint8_t> bytes = test::read_file(path);
  const std::string bad = dir.file("bad.ngram");
  auto error_for = [&](const std::vector<uint8_t>& b, int vocab = 50) {
    test::write_file(bad, b);
    return test::error_of([&] { NgramCache::load(bad, vocab); });
  };
  std::vector<size_t> cuts;  // the header byte by byte, then a stride, then the checksum's bytes
  for (size_t cut = 0; cut < 40; ++cut) cuts.push_back(cut);
  for (size_t cut = 40; cut + 9 < bytes.size(); cut += 53) cuts.push_back(cut);
  for (size_t cut = bytes.size() - 9; cut < bytes.size(); ++cut) cuts.push_back(cut);
  for (size_t cut : cuts) {
    const std::string e = error_for(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut)));
    EXPECT_NE(e.find("bad.ngram"), std::string::npos) << cut << ": " << e;
  }
  EXPECT_NE(error_for(std::vector<uint8_t>(4096, 0xA5)).find("not an n-gram cache file"), std::string::npos);
  auto flipped = bytes;
  flipped[40] ^= 0x10;
  EXPECT_NE(error_for(flipped).find("checksum"), std::string::npos);
  EXPECT_NE(error_for(bytes, 51).find("vocabulary of 50 tokens"), std::string::npos);
  // An id out of range behind a valid checksum (a hostile file, not damage).
  auto hostile = bytes;
  const int32_t big = 1 << 30;
  std::memcpy(hostile.data() + 28, &big, 4);  // the first entry's first context id
  Hash64 h;
  h.update(hostile.data(), hostile.size() - 8);
  const uint64_t sum = h.digest();
  std::memcpy(hostile.data() + hostile.size() - 8, &sum, 8);
  EXPECT_NE(error_for(hostile).find("outside the vocabulary"), std::string::npos) << error_for(hostile);
  auto huge = bytes;  // an entry count that would overflow a naive size check
  const uint64_t count = ~uint64_t{0} / 3;
  std::memcpy(huge.data() + 20, &count, 8);
  EXPECT_NE(error_for(huge).find("announces"), std::string::npos);
  EXPECT_NE(test::error_of([&] { NgramCache::load(dir.file("absent"), 50); }).find("cannot open"), std::string::npos);
}

// stories260K: a cache built from the model's own sampled stories drafts
// continuations the prompt does not hold; greedy output stays that of plain
// decoding and the cache's drafts are accepted.
TEST(NgramCache, LookupWithACacheIsLosslessAndAccepted) {
  POCKET_SKIP_WHEN_EMULATED("ISA-independent drafter logic; the greedy tests run per level");
  const LoadedModel m = load_model(test::stories_model());
  Session s(m.model, m.tokenizer, 256, 1);
  EncodeOptions eo;
  eo.add_bos = true;
  const auto in = m.tokenizer->encode("Once upon a time", eo);
  GenerateOptions o;
  o.max_tokens = 120;
  o.sampling.temperature = 0;
  s.reset();
  const auto want = s.generate(in, o);
  auto cache = std::make_shared<NgramCache>(m.model->config().vocab_size, 2, 8);
  GenerateOptions sampled = o;
  sampled.sampling.temperature = 0.7f;
  for (uint64_t seed = 1; seed <= 12; ++seed) {  // the corpus: sampled stories, never the greedy one itself
    sampled.sampling.seed = seed;
    s.reset();
    auto r = s.generate(in, sampled);
    std::vector<int32_t> doc = in;
    doc.insert(doc.end(), r.tokens.begin(), r.tokens.end());
    cache->add(doc);
  }
  cache->prune(5000);
  LookupDrafter plain_lookup(2, 4), cached(2, 4, cache);
  SpeculativeStats without, with;
  s.reset();
  EXPECT_EQ(generate_speculative(s, plain_lookup, in, o, {8, false}, {}, &without).tokens, want.tokens);
  s.reset();
  EXPECT_EQ(generate_speculative(s, cached, in, o, {8, false}, {}, &with).tokens, want.tokens);
  EXPECT_GT(with.accepted, without.accepted) << "the cache's drafts added no accepted token";
}

}  // namespace
}  // namespace pocket
