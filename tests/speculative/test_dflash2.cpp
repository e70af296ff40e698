// DFlash2 drafts (grouped dynamic causal conv around attention and the MLP,
// low-rank candidate selector) against the float64 reference of
// dflash_reference.h, end to end against plain decoding (greedy and
// sampling), converted into a Pocket draft file, the loader's errors; and
// DFlash / DFlash2 drafts read from llama.cpp's GGUF form, which must give
// exactly the folder's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/test_util.h"
#include "dflash_fixture.h"
#include "dflash_reference.h"
#include "sampling_check.h"
#include "speculative/dflash.h"
#include "speculative/dflash_file.h"
#include "speculative/speculative.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

using test::Draft;
using test::prompt_tokens;
using test::dflash_target;

Draft dflash2_draft(int H, uint64_t seed) {
  Draft d;
  d.make_dflash2(H, seed);
  return d;
}

// Pocket's block logits and drafted tokens against the reference at three
// context lengths, for two shapes: kernel 3 over groups of 8, and kernel 7
// (longer than the block of 5: its far taps read only zeros) over groups of
// 16 with output_multiplier and final_logit_softcapping. Logits within
// 2.5e-3 absolute (as DFlash: f32 accumulation, fp16 keys/values); the
// drafted tokens equal the reference's up to the first row where its best
// score leads the next contender by 0.02 or less.
TEST(DFlash2, DraftLogitsAndSelectionMatchTheFloat64Reference) {
  POCKET_SKIP_WHEN_EMULATED("float64 reference; the conv and selector are plain C++ and the matmuls are tested per level");
  const LoadedModel& m = dflash_target();
  const ModelConfig& c = m.model->config();
  int rescored = 0, compared = 0;
  for (int shape = 0; shape < 2; ++shape) {
    Draft d;
    if (shape == 0) {
      d.make_dflash2(c.dim, 31);
    } else {
      d.output_multiplier = 1.5f, d.softcap = 4.0f;
      d.make_dflash2(c.dim, 37, 7, 16, 12, 5);
    }
    test::TempDir dir;
    d.write(dir.path(), c.dim);
    auto draft = std::make_shared<const DFlashDraft>(dir.path(), c);
    ASSERT_TRUE(draft->config().dflash2());
    Session s(m.model, m.tokenizer, 64, 2);
    DFlashDrafter drafter(draft, s);
    double worst = 0, scale = 0;
    for (int n : {1, 6, 11}) {
      const auto hist = prompt_tokens(n + 1, 50 + static_cast<uint64_t>(n + shape));
      s.reset();
      s.prefill(std::span<const int32_t>(hist.data(), static_cast<size_t>(n)));
      const std::vector<float> got = drafter.block_logits(hist);
      const test::ReferenceBlock want = test::reference_block(d, m, test::format_taps(s, m, n), hist.back());
      ASSERT_EQ(got.size(), static_cast<size_t>(d.block - 1) * c.vocab_size);
      for (int i = 0; i + 1 < d.block; ++i)
        for (int v = 0; v < c.vocab_size; ++v) {
          const double w = want.logits[static_cast<size_t>(i)][static_cast<size_t>(v)];
          worst = std::max(worst, std::abs(got[static_cast<size_t>(i) * c.vocab_size + v] - w));
          scale = std::max(scale, std::abs(w));
        }
      std::vector<int32_t> drafted;
      drafter.draft(hist, d.block - 1, drafted);
      std::vector<double> margins;
      const auto picks = test::reference_select(d, want, hist.back(), margins);
      ASSERT_EQ(drafted.size(), picks.size());
      // Rows up to the first near tie (after it the walks may part).
      for (size_t i = 0; i < picks.size() && margins[i] > 0.02; ++i, ++compared)
        EXPECT_EQ(drafted[i], picks[i]) << "shape " << shape << ", context " << n << ", row " << i;
      for (int i = 0; i + 1 < d.block; ++i) {
        const auto& row = want.logits[static_cast<size_t>(i)];
        rescored += picks[static_cast<size_t>(i)] != std::max_element(row.begin(), row.end()) - row.begin();
      }
    }
    EXPECT_GT(scale, 0.1);
    EXPECT_LT(worst, 2.5e-3) << "shape " << shape << ": largest |logit| " << scale;
  }
  EXPECT_GE(compared, 12) << "too many near ties to compare the selector (of 24 rows)";
  EXPECT_GT(rescored, 0) << "the selector never overruled the argmax: its rescoring is not tested";
}

// End to end: greedy speculative output with a DFlash2 drafter equals plain
// greedy decoding; sampling keeps the distribution of the first two tokens
// (the generic check of sampling_check.h).
TEST(DFlash2, SpeculativeOutputEqualsPlain) {
  POCKET_SKIP_WHEN_EMULATED("DFlash2's own code is ISA-independent C++; DFlash's greedy test covers the emulated kernels");
  const LoadedModel& m = dflash_target();
  const ModelConfig& c = m.model->config();
  test::TempDir dir;
  const Draft d = dflash2_draft(c.dim, 41);
  d.write(dir.path(), c.dim);
  auto draft = std::make_shared<const DFlashDraft>(dir.path(), c);
  Session s(m.model, m.tokenizer, 96, 2);
  DFlashDrafter drafter(draft, s);
  const int drafted = test::expect_greedy_as_plain(s, drafter, 3, 60);
  EXPECT_GT(drafted, 0);
  // With a reduced draft vocabulary the selector's candidates are the
  // subset's: drafts stay inside it, output is unchanged; a subset smaller
  // than the selector's top-k is refused.
  {
    DraftVocab ranking;
    ranking.vocab_size = c.vocab_size;
    for (int i = 0; i < c.vocab_size; ++i) ranking.ranked.push_back((i * 7 + 3) % c.vocab_size);
    write_draft_vocab(dir.file(kDraftVocabFileName), ranking);
    auto ranked = std::make_shared<const DFlashDraft>(dir.path(), c);
    DFlashDrafter sub(ranked, s, 40);
    EXPECT_GT(test::expect_greedy_as_plain(s, sub, 2, 64), 0);
    const std::set<int32_t> allowed(ranking.ranked.begin(), ranking.ranked.begin() + 40);
    std::vector<int32_t> block;
    s.reset();
    sub.draft(std::vector<int32_t>{5}, d.block - 1, block);
    ASSERT_EQ(block.size(), static_cast<size_t>(d.block - 1));
    for (int32_t t : block) EXPECT_TRUE(allowed.count(t)) << t;
    try {
      DFlashDrafter too_small(ranked, s, d.sel_top_k - 1);
      ADD_FAILURE() << "a draft vocabulary smaller than the selector's top-k was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("smaller than the DFlash2 selector's top-k"), std::string::npos) << e.what();
    }
  }
  GenerateOptions so = test::top4_sampling();
  const auto in = prompt_tokens(6, 77);
  const auto exact = test::exact_pair_distribution(s, in, so.sampling);
  test::expect_pair_frequencies(s, drafter, in, so, exact, 1000, 500);
}

// llama.cpp's GGUF form of the same random draft (its key and tensor names,
// 1-based target layers, the mask token as a tokenizer key): the draft
// logits and drafted tokens are bit-identical to the folder's, for a DFlash
// and a DFlash2 draft, also after convert-draft from the GGUF (f32); bad
// GGUF settings get one clear error.
TEST(DFlash2, GgufDraftsGiveTheFolderLogits) {
  POCKET_SKIP_WHEN_EMULATED("the GGUF mapping is ISA-independent");
  const LoadedModel& m = dflash_target();
  const ModelConfig& c = m.model->config();
  Session s(m.model, m.tokenizer, 64, 2);
  const std::vector<std::vector<int32_t>> histories = {prompt_tokens(2, 81), prompt_tokens(9, 83)};
  for (int kind = 0; kind < 2; ++kind) {
    test::TempDir dir;
    Draft d = kind == 0 ? Draft(c.dim, 43) : dflash2_draft(c.dim, 47);
    if (kind == 1) d.output_multiplier = 0.75f;
    d.write(dir.path(), c.dim);
    d.write_gguf(dir.file("draft.gguf"), c.dim);
    const auto folder = test::draft_logits(m, s, dir.path(), histories);
    const auto gguf = test::draft_logits(m, s, dir.file("draft.gguf"), histories);
    ASSERT_GT(test::max_abs(folder), 0.1);
    EXPECT_EQ(gguf, folder) << "kind " << kind;
    // convert-draft from the GGUF: in f32 the same logits again.
    convert_dflash_draft(dir.file("draft.gguf"), dir.file("draft.pocket"), {DType::F32, 32});
    EXPECT_EQ(test::draft_logits(m, s, dir.file("draft.pocket"), histories), folder) << "kind " << kind;
    const DFlashDraft from_gguf(dir.file("draft.gguf"), c);
    EXPECT_EQ(from_gguf.config().target_layer_ids, d.taps);
    EXPECT_EQ(from_gguf.config().dflash2(), kind == 1);
    std::vector<int32_t> a, b;
    for (const std::string& path : {dir.path(), dir.file("draft.gguf")}) {
      DFlashDrafter drafter(std::make_shared<const DFlashDraft>(path, c), s);
      s.reset();
      s.prefill(std::span<const int32_t>(histories[1].data(), histories[1].size() - 1));
      drafter.draft(histories[1], d.block - 1, path == dir.path() ? a : b);
    }
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.size(), static_cast<size_t>(d.block - 1));
  }
  // Bad files: one clear error each (written by the same writer with one
  // thing changed).
  const Draft d = dflash2_draft(c.dim, 53);
  auto expect_error = [&](const Draft& bad, const std::string& says, const std::function<void(GgufWriter&)>& tweak = {}) {
    test::TempDir dir;
    bad.write_gguf(dir.file("bad.gguf"), c.dim, tweak);
    try {
      DFlashDraft x(dir.file("bad.gguf"), c);
      ADD_FAILURE() << "no error; expected one saying " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  Draft far = d;
  far.taps = {0, c.n_layers};
  expect_error(far, "is not a layer of the target");
  Draft group = d;
  group.conv_group = 24;
  expect_error(group, "does not divide the hidden size");
  Draft topk = d;
  topk.sel_top_k = c.vocab_size + 1;
  expect_error(topk, "exceeds the vocabulary");
  Draft zero = d;
  zero.taps = {-1, 1};  // written 1-based: 0
  expect_error(zero, "count target layers from 1");
  static const std::vector<float> row(64, 1.0f);
  expect_error(d, "carries its own token_embd.weight", [](GgufWriter& g) {
    g.add_tensor("token_embd.weight", DType::F32, {1, 64}, row.data(), row.size() * sizeof(float));
  });
  expect_error(d, "dflash.attention.sliding_window", [](GgufWriter& g) { g.set_u32("dflash.attention.sliding_window", 4); });
  expect_error(d, "dflash.attention.causal", [](GgufWriter& g) { g.set_bool("dflash.attention.causal", true); });
  expect_error(d, "dflash.block_size", [](GgufWriter& g) { g.set_string("dflash.block_size", "five"); });
  expect_error(d, "\"conv_group_size\" = 0", [](GgufWriter& g) { g.set_u32("dflash.conv_group_size", 0); });
}

// `pocket convert-draft` carries a DFlash2 draft (3-D conv kernels in f32,
// the matrices quantized): f32 gives the folder's logits exactly, PQ8
// within 4% of the largest |logit| (as DFlash's bound), and greedy output
// with the PQ8 draft equals plain decoding.
TEST(DFlash2, PocketDraftFileCarriesDflash2) {
  POCKET_SKIP_WHEN_EMULATED("conversion is ISA-independent and the PQ kernels are tested per level");
  const LoadedModel& m = dflash_target();
  const ModelConfig& c = m.model->config();
  test::TempDir dir;
  const Draft d = dflash2_draft(c.dim, 59);
  d.write(dir.path(), c.dim);
  Session s(m.model, m.tokenizer, 96, 2);
  const std::vector<std::vector<int32_t>> histories = {prompt_tokens(2, 91), prompt_tokens(8, 97)};
  const std::vector<float> want = test::draft_logits(m, s, dir.path(), histories);
  for (const auto& [type, tolerance] : {std::pair{DType::F32, 0.0}, std::pair{DType::PQ8, 0.04}}) {
    const std::string file = dir.file("draft.pocket");
    const DFlashConvertReport rep = convert_dflash_draft(dir.path(), file, {type, 32});
    // fc, 7 matrices and 2 conv projections per layer, the selector's
    // projection, and in f32 the codebooks, whose rows (8 wide) are shorter
    // than a PQ group.
    EXPECT_EQ(rep.quantized, 1 + 9 * d.layers + 1 + (type == DType::F32 ? 2 : 0));
    const std::vector<float> got = test::draft_logits(m, s, file, histories);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(test::max_diff(got, want), tolerance * test::max_abs(want)) << dtype_name(type);
    if (type == DType::PQ8) {
      DFlashDrafter drafter(std::make_shared<const DFlashDraft>(file, c), s);
      GenerateOptions o;
      o.max_tokens = 20;
      o.sampling.temperature = 0;
      const auto in = prompt_tokens(5, 113);
      s.reset();
      const auto plain = s.generate(in, o);
      s.reset();
      EXPECT_EQ(generate_speculative(s, drafter, in, o, {4, false}).tokens, plain.tokens);
    }
  }
}

// Against tools/dflash_reference.py (numpy, float64; shares no code with
// Pocket), run by scripts/oracles.sh with POCKET_ORACLE_DFLASH set to its
// output: the target's forward for the taps and the drafts' forward in
// Python, the drafts written as z-lab folders and by `gguf` in llama.cpp's
// form. Both forms of both drafts give the reference's logits within 5e-3
// (f16 target weights, f32 accumulation, fp16 draft keys/values) and its
// drafted tokens up to the first row whose score margin is 0.02 or less;
// the GGUF with Q8_0 matrices (quantized by gguf) within 8% of the largest
// |logit| (measured 2.1-2.7% for the DFlash draft, 2.6-4.0% for DFlash2,
// whose random conv coefficients and selector make a worst case; Q8_0
// weights and int8 activations).
TEST(DFlashLive, DraftsMatchTheNumpyReference) {
  const char* dir = std::getenv("POCKET_ORACLE_DFLASH");
  if (!dir) GTEST_SKIP() << "POCKET_ORACLE_DFLASH is not set (scripts/oracles.sh sets it)";
  const auto expected = nlohmann::json::parse(read_text_file(std::string(dir) + "/expected.json"));
  LoadedModel m = load_model(expected["target"].get<std::string>());
  const ModelConfig& c = m.model->config();
  Session s(m.model, m.tokenizer, 64, 2);
  int compared = 0;
  for (const auto& d : expected["drafts"])
    for (const char* form : {"folder", "gguf", "gguf_q8_0"}) {
      const std::string where = d["name"].get<std::string>() + " " + form;
      const bool q8 = std::string(form) == "gguf_q8_0";
      DFlashDrafter drafter(std::make_shared<const DFlashDraft>(d[form].get<std::string>(), c), s);
      for (const auto& k : d["cases"]) {
        const auto hist = k["history"].get<std::vector<int32_t>>();
        s.reset();
        s.prefill(std::span<const int32_t>(hist.data(), hist.size() - 1));
        const std::vector<float> got = drafter.block_logits(hist);
        const auto want = k["logits"].get<std::vector<std::vector<double>>>();
        ASSERT_EQ(got.size(), want.size() * static_cast<size_t>(c.vocab_size)) << where;
        double worst = 0, scale = 0;
        for (size_t i = 0; i < want.size(); ++i)
          for (int v = 0; v < c.vocab_size; ++v) {
            const double w = want[i][static_cast<size_t>(v)];
            worst = std::max(worst, std::abs(got[i * static_cast<size_t>(c.vocab_size) + static_cast<size_t>(v)] - w));
            scale = std::max(scale, std::abs(w));
          }
        if (q8) {  // quantized weights against the float reference: a bound, no token check
          EXPECT_LT(worst, 0.08 * scale) << where;
          EXPECT_GT(worst, 5e-3) << where << ": the Q8_0 file gave the float logits: not quantized?";
          continue;
        }
        EXPECT_LT(worst, 5e-3) << where;
        std::vector<int32_t> drafted;
        drafter.draft(hist, static_cast<int>(want.size()), drafted);
        const auto picks = k["picks"].get<std::vector<int32_t>>();
        const auto margins = k["margins"].get<std::vector<double>>();
        for (size_t i = 0; i < picks.size() && margins[i] > 0.02; ++i, ++compared)
          EXPECT_EQ(drafted[i], picks[i]) << where << " row " << i;
      }
    }
  EXPECT_GE(compared, 20);
}

// Hostile DFlash2 configs and tensors: one clear error each.
TEST(DFlash2, BadDraftsGetOneClearError) {
  const LoadedModel& m = dflash_target();
  const ModelConfig& c = m.model->config();
  const Draft d = dflash2_draft(c.dim, 61);
  // The folder of `d` with `from` replaced by `to` in config.json (or the
  // tensor `drop` left out), which must fail saying `says`.
  auto expect_error = [&](const Draft& x, const std::string& from, const std::string& to, const std::string& says,
                          const std::string& drop = "") {
    test::TempDir dir;
    x.write(dir.path(), c.dim, drop);
    std::string cfg = x.config_json(c.dim);
    if (!from.empty()) {
      const size_t at = cfg.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      cfg.replace(at, from.size(), to);
    }
    std::ofstream(dir.file("config.json")) << cfg;
    try {
      DFlashDraft bad(dir.path(), c);
      ADD_FAILURE() << "no error; expected one saying " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_error(d, "\"conv_kernel_size\": 3", "\"conv_kernel_size\": 0", "must be an integer from 1");
  expect_error(d, "\"selector_rank\": 8", "\"selector_rank\": 0", "must be an integer from 1");
  expect_error(d, "\"selector_top_k\": 8", "\"selector_top_k\": -2", "must be an integer from 1");
  expect_error(d, "\"selector_top_k\": 8", "\"selector_top_k\": 301", "exceeds the vocabulary");
  expect_error(d, "\"conv_group_size\": 8", "\"conv_group_size\": 24", "does not divide the hidden size");
  expect_error(d, "\"conv_group_size\": 8", "\"conv_group_size\": \"8\"", "must be an integer");
  expect_error(d, "\"conv_kernel_size\": 3", "\"conv_kernel_size\": 1000", "too large");
  expect_error(d, ", \"selector_rank\": 8", "", "needs \"selector_rank\"");
  expect_error(d, "\"conv_kernel_size\": 3", "\"conv_kernel_size\": 4", "kernel_projection.weight has the wrong shape");
  Draft flat = d;
  flat.w["layers.1.mlp_conv.base_kernel"].first = {6, c.dim};  // the right count, not 2 x 3 x 64
  expect_error(flat, "", "", "layers.1.mlp_conv.base_kernel has the wrong shape");
  expect_error(d, "\"selector_rank\": 8", "\"selector_rank\": 6", "candidate_selector.predecessor_codebook has the wrong shape");
  expect_error(d, "", "", "layers.1.mlp_conv.kernel_projection.weight is missing", "layers.1.mlp_conv.kernel_projection.weight");
  expect_error(d, "", "", "candidate_selector.hidden_projection.weight is missing", "candidate_selector.hidden_projection.weight");
  // Named DFlash2 without its settings; DFlash2 tensors under a DFlash
  // config: refused, not ignored.
  const Draft plain(c.dim, 67);
  expect_error(plain, "DFlashDraftModel", "DFlash2DraftModel", "needs \"conv_kernel_size\"");
  Draft with_conv = d;
  with_conv.conv_kernel = 0;  // the config says DFlash, the tensors are DFlash2's
  expect_error(with_conv, "", "", "is not part of a DFlash draft");
  expect_error(d, "\"mask_token_id\"", "\"output_multiplier\": -1, \"mask_token_id\"", "output_multiplier");
  expect_error(d, "\"mask_token_id\"", "\"final_logit_softcapping\": -3, \"mask_token_id\"", "final_logit_softcapping");
  expect_error(d, "\"mask_token_id\"", "\"input_embedding_scale\": 2.0, \"mask_token_id\"", "input_embedding_scale");
}

}  // namespace
}  // namespace pocket
