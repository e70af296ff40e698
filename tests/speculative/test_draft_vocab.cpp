// Reduced draft vocabularies (speculative/draft_vocab.h): the ranking file
// and its errors, the gathered head rows against the full head, and DFlash
// drafting over a subset: its logits are the full logits' columns, greedy
// output equals plain decoding and sampling keeps the target's distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

#include "common/test_util.h"
#include "dflash_fixture.h"
#include "formats/gguf_writer.h"
#include "kernels/kernels.h"
#include "quant/quantize.h"
#include "sampling_check.h"
#include "speculative/dflash.h"
#include "speculative/dflash_file.h"
#include "speculative/draft_vocab.h"
#include "speculative/speculative.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

// Expects `f` to throw pocket::Error whose message contains `says`.
template <class F>
void expect_error(F&& f, const std::string& says) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying " << says;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// A random permutation of the tiny target's vocabulary as the ranking.
DraftVocab shuffled_vocab(int vocab, uint64_t seed) {
  DraftVocab v;
  v.vocab_size = vocab;
  v.ranked.resize(static_cast<size_t>(vocab));
  std::iota(v.ranked.begin(), v.ranked.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(v.ranked.begin(), v.ranked.end(), rng);
  return v;
}

// A random tiny draft (dflash_fixture.h) with `ranking` as its draft_vocab.txt.
std::shared_ptr<const DFlashDraft> draft_with_ranking(const test::TempDir& dir, const DraftVocab& ranking, uint64_t seed) {
  const ModelConfig& c = test::dflash_target().model->config();
  test::Draft d(c.dim, seed);
  d.write(dir.path(), c.dim);
  write_draft_vocab(dir.file(kDraftVocabFileName), ranking);
  return std::make_shared<const DFlashDraft>(dir.path(), c);
}

TEST(DraftVocab, RankingIsByCountWithTheFirstTokensAheadAndTheFileRoundTrips) {
  const std::vector<uint64_t> counts = {5, 0, 9, 5, 1, 0, 9};
  const DraftVocab v = rank_tokens(counts, std::vector<int32_t>{5, 2});
  EXPECT_EQ(v.vocab_size, 7);
  EXPECT_EQ(v.ranked, (std::vector<int32_t>{5, 2, 6, 0, 3, 4}));  // unseen 1 left out, ties by id
  EXPECT_EQ(rank_tokens(counts, {}, 3).ranked, (std::vector<int32_t>{2, 6, 0}));
  test::TempDir dir;
  write_draft_vocab(dir.file("r.txt"), v);
  const DraftVocab back = read_draft_vocab(dir.file("r.txt"));
  EXPECT_EQ(back.vocab_size, v.vocab_size);
  EXPECT_EQ(back.ranked, v.ranked);
  // Counted on a corpus with a model's tokenizer: the end-of-sequence
  // tokens first, then the corpus's most used token.
  const LoadedModel& m = test::dflash_target();
  std::ofstream(dir.file("corpus.txt")) << "aaaa aaaa aaaa\nab ab\n\nba\n";
  const DraftVocab built = build_draft_vocab(*m.tokenizer, {dir.file("corpus.txt")}, 2);
  const std::vector<int32_t> eos = eos_ids(*m.tokenizer);
  ASSERT_GT(built.ranked.size(), eos.size());
  EXPECT_TRUE(std::equal(eos.begin(), eos.end(), built.ranked.begin()));
  const auto a = m.tokenizer->encode("aaaa aaaa aaaa", {});
  std::map<int32_t, int> freq;
  for (int32_t t : a) ++freq[t];
  const int32_t top = std::max_element(freq.begin(), freq.end(), [](auto& x, auto& y) { return x.second < y.second; })->first;
  EXPECT_EQ(built.ranked[eos.size()], top);
}

TEST(DraftVocab, HostileRankingsGetOneClearError) {
  test::TempDir dir;
  auto parse = [&](const std::string& text) { return [text] { parse_draft_vocab(text, "r.txt"); }; };
  expect_error(parse(""), "not a draft vocabulary file");
  expect_error(parse("1\n2\n"), "not a draft vocabulary file");
  expect_error(parse("pocket-draft-vocab 2 10\n1\n"), "unsupported draft vocabulary version");
  expect_error(parse("pocket-draft-vocab 1 0\n1\n"), "bad vocabulary size");
  expect_error(parse("pocket-draft-vocab 1 ten\n1\n"), "bad vocabulary size");
  expect_error(parse("pocket-draft-vocab 1 10\n"), "ranks no token");
  expect_error(parse("pocket-draft-vocab 1 10\n3\n10\n"), "line 3 is token 10, outside the vocabulary of 10");
  expect_error(parse("pocket-draft-vocab 1 10\n3\n-1\n"), "line 3 is not a token id");
  expect_error(parse("pocket-draft-vocab 1 10\n3\n\n4\n"), "line 3 is not a token id");
  expect_error(parse("pocket-draft-vocab 1 10\n3 4\n"), "line 2 is not a token id");
  expect_error(parse("pocket-draft-vocab 1 10\n99999999999999999999\n"), "line 2 is not a token id");
  expect_error(parse("pocket-draft-vocab 1 10\n3\n4\n3\n"), "lists token 3 twice");
  EXPECT_EQ(parse_draft_vocab("pocket-draft-vocab 1 10\r\n3\r\n4", "r.txt").ranked, (std::vector<int32_t>{3, 4}));
  expect_error([&] { read_draft_vocab(dir.file("absent.txt")); }, "absent.txt");
  expect_error([&] { write_draft_vocab(dir.file("w.txt"), DraftVocab{5, {1, 7}}); }, "outside the vocabulary of 5");

  // With a draft: a ranking of another vocabulary, sizes it cannot give.
  const LoadedModel& m = test::dflash_target();
  const ModelConfig& c = m.model->config();
  {
    test::TempDir d;
    expect_error([&] { draft_with_ranking(d, DraftVocab{c.vocab_size + 1, {1, 2}}, 3); }, "the target has");
  }
  test::TempDir d;
  auto draft = draft_with_ranking(d, DraftVocab{c.vocab_size, {1, 2, 3}}, 3);
  Session s(m.model, m.tokenizer, 32, 1);
  expect_error([&] { DFlashDrafter x(draft, s, 4); }, "the draft's ranking holds 3");
  expect_error([&] { DFlashDrafter x(draft, s, -2); }, "must be >= 0");
  EXPECT_NO_THROW(DFlashDrafter(draft, s, c.vocab_size));  // the whole vocabulary needs no ranking
  test::TempDir plain;
  test::Draft(c.dim, 3).write(plain.path(), c.dim);
  auto unranked = std::make_shared<const DFlashDraft>(plain.path(), c);
  EXPECT_EQ(unranked->draft_vocab(), nullptr);
  expect_error([&] { DFlashDrafter x(unranked, s, 8); }, "needs a ranking stored with the draft");
  EXPECT_NO_THROW(DFlashDrafter(unranked, s));  // the default: the whole vocabulary without a ranking

  // A Pocket draft file whose ranking metadata is damaged.
  auto file_with = [&](const std::vector<int32_t>& ids, int32_t vocab) {
    GgufWriter w;
    w.set_u32("pocket.version", 1);
    w.set_string(kDFlashConfigKey, "{}");
    std::vector<GgufMeta> a;
    for (int32_t id : ids) a.push_back(GgufMeta::i32(id));
    w.set(kDraftVocabKey, GgufMeta::array(a, GgufType::I32));
    if (vocab >= 0) w.set_i32(kDraftVocabSizeKey, vocab);
    w.write(dir.file("bad.pocket"));
    return [&] { open_dflash_draft_file(dir.file("bad.pocket")); };
  };
  expect_error(file_with({1, 2}, -1), "pocket.dflash.draft_vocab_size");
  expect_error(file_with({1, 12}, 10), "token 12, outside the vocabulary of 10");
  expect_error(file_with({1, 2, 1}, 10), "lists token 1 twice");
  expect_error(file_with({}, 10), "ranks no token");
}

// The gathered rows give bit for bit the full head's logits of the same
// tokens (tolerance 0: the same bytes through the same kernel), for every
// weight type a head comes in, with a row count that is no multiple of the
// PQ tile and unordered ids.
TEST(DraftVocab, SubsetHeadLogitsAreTheFullHeadsRows) {
  const int64_t rows = 301, cols = 64;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0.0f, 0.5f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(3 * static_cast<size_t>(cols));
  for (auto& v : w) v = g(rng);
  for (auto& v : x) v = g(rng);
  std::vector<int32_t> ids = shuffled_vocab(static_cast<int>(rows), 9).ranked;
  ids.resize(37);
  ids.push_back(300);  // the last, padded tile
  ThreadPool pool(2);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::PQ8, DType::PQ4}) {
    const std::vector<uint8_t> bytes = quantize(w.data(), rows, cols, type, 32);
    TensorView head;
    head.name = "output.weight";
    head.type = type;
    head.shape = {rows, cols};
    head.data = bytes.data();
    head.nbytes = bytes.size();
    head.group = type == DType::PQ4 || type == DType::PQ8 ? 32 : 0;
    const SubsetHead sub(head, ids);
    ASSERT_EQ(sub.size(), static_cast<int>(ids.size()));
    std::vector<float> full(3 * static_cast<size_t>(rows)), part(3 * ids.size());
    kernels::matmul(head, x.data(), 3, full.data(), &pool);
    kernels::matmul(sub.view(), x.data(), 3, part.data(), &pool);
    for (size_t r = 0; r < 3; ++r)
      for (size_t j = 0; j < ids.size(); ++j)
        ASSERT_EQ(part[r * ids.size() + j], full[r * static_cast<size_t>(rows) + static_cast<size_t>(ids[j])])
            << dtype_name(type) << " row " << r << " token " << ids[j];
  }
}

// The DFlash drafter over a subset: its block logits are the full block
// logits' columns of the subset's tokens (tolerance 0), from the folder
// and from a Pocket draft file that carries the ranking.
TEST(DraftVocab, DFlashSubsetLogitsAreTheFullLogitsColumns) {
  const LoadedModel& m = test::dflash_target();
  const ModelConfig& c = m.model->config();
  test::TempDir dir;
  const DraftVocab ranking = shuffled_vocab(c.vocab_size, 21);
  auto draft = draft_with_ranking(dir, ranking, 17);
  Session s(m.model, m.tokenizer, 64, 2);
  const auto hist = test::prompt_tokens(9, 33);
  auto block = [&](DFlashDrafter& d) {
    s.reset();
    s.prefill(std::span<const int32_t>(hist.data(), hist.size() - 1));
    return d.block_logits(hist);
  };
  DFlashDrafter whole(draft, s, 0);
  ASSERT_EQ(whole.logits_width(), c.vocab_size);
  const std::vector<float> full = block(whole);
  const int B = draft->config().block_size;
  for (int n : {1, 50, c.vocab_size - 1}) {
    DFlashDrafter part(draft, s, n);
    ASSERT_EQ(part.logits_width(), n);
    const std::vector<float> sub = block(part);
    ASSERT_EQ(sub.size(), static_cast<size_t>(B - 1) * n);
    for (int i = 0; i + 1 < B; ++i)
      for (int j = 0; j < n; ++j) {
        ASSERT_EQ(part.token_of(j), ranking.ranked[static_cast<size_t>(j)]);
        ASSERT_EQ(sub[static_cast<size_t>(i) * n + j], full[static_cast<size_t>(i) * c.vocab_size + static_cast<size_t>(part.token_of(j))])
            << "n " << n << " row " << i << " column " << j;
      }
  }
  // convert-draft carries the ranking into the Pocket file.
  const DFlashConvertReport rep = convert_dflash_draft(dir.path(), dir.file("d.pocket"), {DType::F32, 32});
  EXPECT_EQ(rep.draft_vocab, c.vocab_size);
  auto file = std::make_shared<const DFlashDraft>(dir.file("d.pocket"), c);
  ASSERT_NE(file->draft_vocab(), nullptr);
  EXPECT_EQ(file->draft_vocab()->ranked, ranking.ranked);
  DFlashDrafter from_file(file, s, 50);
  const std::vector<float> sub = block(from_file);
  for (int i = 0; i + 1 < B; ++i)
    for (int j = 0; j < 50; ++j)
      ASSERT_EQ(sub[static_cast<size_t>(i) * 50 + j], full[static_cast<size_t>(i) * c.vocab_size + static_cast<size_t>(ranking.ranked[static_cast<size_t>(j)])]);
}

// Lossless: greedy output with a reduced draft vocabulary equals plain
// greedy decoding, down to a one-token vocabulary (every draft rejected
// unless the target's argmax is that token).
TEST(DraftVocab, GreedyDFlashWithAReducedVocabularyEqualsPlain) {
  POCKET_SKIP_WHEN_EMULATED("47 s under qemu; the subset logits (per ISA) are tested above and acceptance is ISA-independent");
  const LoadedModel& m = test::dflash_target();
  const ModelConfig& c = m.model->config();
  test::TempDir dir;
  // Ranked by the target's own greedy choices first, so drafts get accepted.
  Session s(m.model, m.tokenizer, 96, 2);
  GenerateOptions o;
  o.max_tokens = 24;
  o.sampling.temperature = 0;
  std::vector<std::vector<int32_t>> prompts, plain;
  std::vector<uint64_t> counts(static_cast<size_t>(c.vocab_size), 0);
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(test::prompt_tokens(3 + 4 * i, 140 + static_cast<uint64_t>(i)));
    s.reset();
    plain.push_back(s.generate(prompts.back(), o).tokens);
    for (int32_t t : plain.back()) ++counts[static_cast<size_t>(t)];
  }
  DraftVocab ranking = rank_tokens(counts, {});
  for (int32_t id : shuffled_vocab(c.vocab_size, 3).ranked)
    if (!counts[static_cast<size_t>(id)]) ranking.ranked.push_back(id);
  auto draft = draft_with_ranking(dir, ranking, 11);
  int accepted = 0;
  for (int n : {1, 8, 150}) {
    DFlashDrafter drafter(draft, s, n);
    for (size_t i = 0; i < prompts.size(); ++i)
      for (int k : {1, 4}) {
        SpeculativeStats st;
        s.reset();
        const auto got = generate_speculative(s, drafter, prompts[i], o, {k, false}, {}, &st);
        EXPECT_EQ(got.tokens, plain[i]) << "n " << n << " prompt " << i << " k " << k;
        EXPECT_GT(st.drafted, 0);
        accepted += st.accepted;
      }
  }
  EXPECT_GT(accepted, 0);
}

// Sampling: the drafts of a reduced vocabulary are still point proposals,
// accepted with probability p(d) and otherwise replaced by a draw from p
// without d, over the whole vocabulary: the first two generated tokens
// follow the exact distribution of plain sampling (within 5 sigma).
TEST(DraftVocab, SamplingWithAReducedVocabularyKeepsTheDistribution) {
  POCKET_SKIP_WHEN_EMULATED("2000 short generations; the rule is ISA-independent");
  const LoadedModel& m = test::dflash_target();
  const ModelConfig& c = m.model->config();
  Session s(m.model, m.tokenizer, 64, 1);
  GenerateOptions o = test::top4_sampling();
  const auto in = test::prompt_tokens(6, 77);
  const auto exact = test::exact_pair_distribution(s, in, o.sampling);
  // The subset: the two likeliest second tokens (so drafts are often
  // candidates of the target, accepted or not), then the rest shuffled.
  std::vector<double> mass(static_cast<size_t>(c.vocab_size), 0.0);
  for (const auto& [cell, p] : exact) mass[static_cast<size_t>(cell.second)] += p;
  std::vector<uint64_t> counts(static_cast<size_t>(c.vocab_size), 0);
  for (int r = 2; r > 0; --r) {
    const auto top = std::max_element(mass.begin(), mass.end()) - mass.begin();
    counts[static_cast<size_t>(top)] = static_cast<uint64_t>(r);
    mass[static_cast<size_t>(top)] = -1;
  }
  DraftVocab ranking = rank_tokens(counts, {});
  for (int32_t id : shuffled_vocab(c.vocab_size, 4).ranked)
    if (!counts[static_cast<size_t>(id)]) ranking.ranked.push_back(id);
  test::TempDir dir;
  DFlashDrafter drafter(draft_with_ranking(dir, ranking, 19), s, 2);
  int accepted = 0;
  test::expect_pair_frequencies(s, drafter, in, o, exact, 2000, 1000, &accepted);
  EXPECT_GT(accepted, 100) << "too few drafts accepted to test the rule";  // 180 of 2000 here
}

}  // namespace
}  // namespace pocket
