// A Qwen3-shaped model stored in llama.cpp's block types (K-quants, Q4_1,
// Q5_0, Q5_1), written with GgufWriter: the fast forward pass agrees with
// the reference forward pass on the same file, the quantized model stays
// close to the F32 model it came from, and `pocket quantize` turns the file
// into a Pocket file that still agrees.
#include <gtest/gtest.h>

#include <cmath>

#include "common/gguf_kquant_pack.h"
#include "common/test_util.h"
#include "convert/quantize_model.h"
#include "core/pq_format.h"
#include "kernels/kernels.h"
#include "quant/source_grid.h"
#include "util/half.h"
#include "formats/gguf_writer.h"
#include "model/model.h"
#include "model/reference_model.h"
#include "model/synthetic.h"
#include "util/thread_pool.h"
#include "tokenizer/llama2c_vocab.h"

namespace pocket {
namespace {

// tiny-qwen3 widened so every matrix row is whole 256-element super-blocks.
ModelConfig kquant_config() {
  ModelConfig c = preset_config("tiny-qwen3");
  c.dim = 256;
  c.hidden_dim = 512;
  c.head_dim = 64;  // 4 heads: q is 256 wide, k/v 128
  c.vocab_size = 512;
  return c;
}

// Which type each 2-D weight gets: `mix` spreads all nine types over the
// model, like llama.cpp's mixed presets (Q4_K_M keeps attn_v / ffn_down and
// the tied embedding at higher precision); otherwise every matrix is `type`.
DType type_for(const std::string& name, DType type, bool mix) {
  if (!mix) return type;
  const bool l1 = name.starts_with("blk.1.");
  if (name == "token_embd.weight") return DType::Q6_K;
  if (name.ends_with("attn_q.weight")) return l1 ? DType::Q4_1 : DType::Q4_K;
  if (name.ends_with("attn_k.weight")) return l1 ? DType::Q5_0 : DType::Q4_K;
  if (name.ends_with("attn_v.weight")) return l1 ? DType::Q5_1 : DType::Q6_K;
  if (name.ends_with("attn_output.weight")) return DType::Q4_K;
  if (name.ends_with("ffn_gate.weight")) return l1 ? DType::Q3_K : DType::Q4_K;
  if (name.ends_with("ffn_up.weight")) return l1 ? DType::Q2_K : DType::Q4_K;
  if (name.ends_with("ffn_down.weight")) return l1 ? DType::Q8_K : DType::Q5_K;
  return type;
}

struct KFiles {
  test::TempDir dir;
  std::shared_ptr<const ModelFile> f32;  // the synthetic weights before quantization
  std::string path;                      // the GGUF with quantized weights
};

std::unique_ptr<KFiles> write_kquant_gguf(DType type, bool mix) {
  auto out = std::make_unique<KFiles>();
  SyntheticSpec spec;
  spec.config = kquant_config();
  spec.seed = 3;
  out->f32 = std::make_shared<ModelFile>(make_synthetic_model(spec));
  GgufWriter w;
  add_config_metadata(w, spec.config);
  add_vocab_metadata(w, vocab_from_llama2c(test::stories_tokenizer(), spec.config.vocab_size), "");
  std::vector<std::vector<uint8_t>> keep;  // must outlive write()
  keep.reserve(out->f32->tensors.size());
  for (const auto& [name, t] : out->f32->tensors) {
    if (t.shape.size() != 2) {
      w.add_tensor(name, t.type, t.shape, t.data, t.nbytes);
      continue;
    }
    const DType k = type_for(name, type, mix);
    keep.push_back(test::quantize_k(k, static_cast<const float*>(t.data), t.rows(), t.cols()));
    w.add_tensor(name, k, t.shape, keep.back().data(), keep.back().size());
  }
  out->path = out->dir.file("k.gguf");
  w.write(out->path);
  return out;
}

using test::rel_err;
using test::some_tokens;

double cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) ab += double{a[i]} * b[i], aa += double{a[i]} * a[i], bb += double{b[i]} * b[i];
  return ab / std::sqrt(aa * bb + 1e-30);
}

// Reference logits for every position of `tokens`.
std::vector<float> reference_logits(const ModelFile& f, const std::vector<int32_t>& tokens) {
  ReferenceModel ref(f);
  const int V = f.config.vocab_size;
  std::vector<float> all(tokens.size() * V);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& l = ref.forward(tokens[i]);
    std::copy(l.begin(), l.end(), all.begin() + static_cast<ptrdiff_t>(i * V));
  }
  return all;
}

struct KQuantCase {
  const char* name;
  DType type;
  bool mix;
  double min_cosine;  // of the logits with the unquantized model's
  double tol = 2e-3;  // against the reference on the same file, relative to the logit scale
};

class KQuantModel : public ::testing::TestWithParam<KQuantCase> {};

// Tolerance against the reference on the same file: both dequantize the same
// weights with the same code. For types without a SIMD kernel the fast
// path's matmul is the scalar one and what differs is the fp16 KV cache and
// float vs double accumulation elsewhere, as for F32 weights in
// test_forward.cpp (2e-3). Q4_K, Q5_K, Q6_K, Q4_1, Q5_0 and Q5_1 (and the
// mixed file, mostly K-quants) have int8 kernels (gguf_kernels.h) that
// quantize the activations to int8 blocks first: 6e-2 as for Q4_0 / Q8_0 in
// test_forward.cpp (measured 1.3-1.8e-2 for the three 32-blocks).
TEST_P(KQuantModel, FastForwardMatchesTheReferenceOnTheSameFile) {
  const KQuantCase& c = GetParam();
  auto files = write_kquant_gguf(c.type, c.mix);
  auto file = std::make_shared<const ModelFile>(open_model(files->path));
  for (const auto& [name, t] : file->tensors) {
    if (t.shape.size() == 2) {
      ASSERT_EQ(t.type, type_for(name, c.type, c.mix)) << name;
    }
  }

  const int V = file->config.vocab_size, n = test::emulated() ? 9 : 21;  // the float64 reference crawls under qemu
  auto tokens = some_tokens(n, V, 8);
  const auto want = reference_logits(*file, tokens);
  ThreadPool pool(2);
  auto check = [&](const Model& model) {
    {  // decode, one token at a time
      Context ctx(model.config(), 64);
      std::vector<float> logits(V);
      for (int i = 0; i < n; ++i) {
        model.forward(std::span(&tokens[i], 1), ctx, pool, logits.data());
        ASSERT_LT(rel_err(logits.data(), &want[static_cast<size_t>(i) * V], V), c.tol) << "decode token " << i;
      }
    }
    {  // prefill with all logits
      Context ctx(model.config(), 64);
      std::vector<float> logits(static_cast<size_t>(n) * V);
      model.forward(tokens, ctx, pool, logits.data(), /*all_logits=*/true);
      for (int i = 0; i < n; ++i)
        ASSERT_LT(rel_err(&logits[static_cast<size_t>(i) * V], &want[static_cast<size_t>(i) * V], V), c.tol)
            << "prefill row " << i;
    }
  };
  // Q4_K / Q5_K matrices run as PQ4 / PQ5 copies by default
  // (quant/source_grid.h: scales within 2^-11 relative) and as stored with
  // exact_kquants: both within
  // the same bound of the reference. Q5_0, Q5_1 (and Q4_0, Q8_0) run as
  // exact PQ copies either way.
  int q4k = 0, exact = 0;
  for (const auto& [name, t] : file->tensors) {
    q4k += t.shape.size() == 2 && (t.type == DType::Q4_K || t.type == DType::Q5_K);
    exact += t.shape.size() == 2 && (t.type == DType::Q5_0 || t.type == DType::Q5_1 || t.type == DType::Q4_0 ||
                                     t.type == DType::Q8_0);
  }
  {
    SCOPED_TRACE("Q4_K / Q5_K as PQ4 / PQ5");
    Model model(file);
    EXPECT_EQ(model.repacked_weights(), q4k + exact);
    // What the kernels read (pocket bench's bytes per token): the copies'
    // sizes, 16-row tiles of 32-column groups of 20 (PQ4), 24 (PQ5) or 34
    // (PQ8) bytes per row, for the repacked types; the file's otherwise.
    for (const auto& [name, t] : file->tensors) {
      if (t.shape.size() != 2) continue;
      const bool five = t.type == DType::Q5_0 || t.type == DType::Q5_1 || t.type == DType::Q5_K;
      const bool four = t.type == DType::Q4_0 || t.type == DType::Q4_K, eight = t.type == DType::Q8_0;
      const uint64_t per_group = five ? 24 : four ? 20 : eight ? 34 : 0;
      const uint64_t want = per_group ? (t.rows() + 15) / 16 * 16 * (t.cols() / 32) * per_group : t.nbytes;
      EXPECT_EQ(model.run_nbytes(name), want) << name << " " << dtype_name(t.type);
    }
    check(model);
  }
  if (q4k > 0) {
    SCOPED_TRACE("exact_kquants");
    Model model(file, /*exact_kquants=*/true);
    EXPECT_EQ(model.repacked_weights(), exact);
    check(model);
  }
  // The quantized weights still describe the same model: a decoder that
  // scrambled elements or sub-block scales would give logits unrelated to
  // the F32 model's (cosine near 0). Random 2-layer models amplify weight
  // error about 5x into the logits, so the bounds are per type, about 2x
  // below the cosine gap measured with the test's round-to-nearest quantizer.
  const auto f32 = reference_logits(*files->f32, tokens);
  double worst = 1;
  for (int i = 0; i < n; ++i)
    worst = std::min(worst, cosine(&want[static_cast<size_t>(i) * V], &f32[static_cast<size_t>(i) * V], V));
  EXPECT_GT(worst, c.min_cosine) << "cosine of the logits with the F32 model's";
  RecordProperty("min_cosine_vs_f32", std::to_string(worst));
}

// `pocket quantize` reads these types through dequant_row: the PQ8 Pocket
// file must agree with the reference on the K-quant file within PQ8's own
// tolerance (int8 weights and activations, 6e-2 as in test_forward.cpp).
TEST(KQuantModel, QuantizesIntoAPocketFile) {
  auto files = write_kquant_gguf(DType::Q4_K, /*mix=*/true);
  convert::QuantizeOptions o;
  o.weights = o.embed = DType::PQ8;
  o.group = 32;
  const std::string out = files->dir.file("k.pocket");
  convert::quantize_model(files->path, out, o);
  auto pocket = std::make_shared<const ModelFile>(open_model(out));
  EXPECT_EQ(pocket->format, "pocket");
  EXPECT_EQ(pocket->get("blk.0.ffn_down.weight").type, DType::PQ8);

  auto src = std::make_shared<const ModelFile>(open_model(files->path));
  const int V = src->config.vocab_size, n = 12;
  auto tokens = some_tokens(n, V, 3);
  const auto want = reference_logits(*src, tokens);
  Model model(pocket);
  ThreadPool pool(1);
  Context ctx(model.config(), 64);
  std::vector<float> logits(static_cast<size_t>(n) * V);
  model.forward(tokens, ctx, pool, logits.data(), /*all_logits=*/true);
  for (int i = 0; i < n; ++i)
    EXPECT_LT(rel_err(&logits[static_cast<size_t>(i) * V], &want[static_cast<size_t>(i) * V], V), 6e-2) << "row " << i;
}

// `--weights source` never goes below the source: on the mixed file (every
// GGUF type Pocket reads), Q4_K/Q4_1 tensors become PQ4 and every value is
// within the fp16 rounding of its sub-block's scale and offset (0 for Q4_1),
// Q5_0 becomes PQ8 bit for bit, and the types without an exact PQ form
// become PQ8 within half a PQ8 step of their values.
TEST(KQuantSourceGrid, NeverBelowTheSource) {
  auto files = write_kquant_gguf(DType::Q4_K, /*mix=*/true);
  convert::QuantizeOptions o;
  o.source_grid = true;
  o.group = 32;
  const std::string out = files->dir.file("src.pocket");
  convert::quantize_model(files->path, out, o);
  auto src = std::make_shared<const ModelFile>(open_model(files->path));
  auto pq = std::make_shared<const ModelFile>(open_model(out));
  int seen_pq4 = 0, seen_exact_pq8 = 0, seen_requantized = 0;
  for (const auto& [name, t] : src->tensors) {
    const TensorView& p = pq->get(name);
    if (t.shape.size() != 2) {
      EXPECT_EQ(p.type, DType::F32) << name;
      continue;
    }
    SCOPED_TRACE(name + " " + std::string(dtype_name(t.type)));
    ASSERT_EQ(p.type, quant::source_grid_type(t.type));
    ASSERT_EQ(p.group, 32);
    const bool exact = t.type == DType::Q4_1 || t.type == DType::Q5_0;
    (p.type == DType::PQ4 ? seen_pq4 : exact ? seen_exact_pq8 : seen_requantized)++;
    const int64_t cols = t.cols(), groups = cols / 32;
    const int64_t gbytes = pq::group_block_bytes(p.type, 32);
    std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
    for (int64_t r = 0; r < t.rows(); ++r) {
      kernels::dequant_row(t, r, a.data());
      kernels::dequant_row(p, r, b.data());
      for (int64_t g = 0; g < groups; ++g) {
        const auto* blk = static_cast<const uint8_t*>(p.data) + ((r / 16) * groups + g) * gbytes;
        auto half = [&](int at) { return static_cast<double>(f16_to_f32(static_cast<uint16_t>(blk[at] | blk[at + 1] << 8))); };
        const double s = half(2 * static_cast<int>(r % 16));
        // Q4_K: the fp16 rounding of the stored s and m (one more ulp of
        // slack, the bound is taken at the rounded values); PQ8 from values:
        // half a step.
        const double bound = exact                       ? 0
                             : p.type == DType::PQ4      ? 1.001 * quant::pq_grid_error_bound(s, half(32 + 2 * static_cast<int>(r % 16)))
                                                         : 0.5 * std::fabs(s) * 1.0001;
        for (int64_t k = g * 32; k < g * 32 + 32; ++k)
          ASSERT_LE(std::fabs(double{a[static_cast<size_t>(k)]} - b[static_cast<size_t>(k)]), bound)
              << "row " << r << " column " << k;
      }
    }
  }
  EXPECT_GT(seen_pq4, 0);
  EXPECT_GT(seen_exact_pq8, 0);
  EXPECT_GT(seen_requantized, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Types, KQuantModel,
    // Measured: mixed 0.952, Q2_K 0.399, Q3_K 0.726, Q4_K 0.936, Q5_K 0.986, Q6_K 0.9965,
    // Q8_K 0.9997, Q4_1 0.944, Q5_0 0.981, Q5_1 0.986.
    ::testing::Values(KQuantCase{"Mixed", DType::Q4_K, true, 0.9, 6e-2}, KQuantCase{"Q2_K", DType::Q2_K, false, 0.2},
                      KQuantCase{"Q3_K", DType::Q3_K, false, 0.45}, KQuantCase{"Q4_K", DType::Q4_K, false, 0.87, 6e-2},
                      KQuantCase{"Q5_K", DType::Q5_K, false, 0.97, 6e-2}, KQuantCase{"Q6_K", DType::Q6_K, false, 0.993, 6e-2},
                      KQuantCase{"Q8_K", DType::Q8_K, false, 0.9994}, KQuantCase{"Q4_1", DType::Q4_1, false, 0.89, 6e-2},
                      KQuantCase{"Q5_0", DType::Q5_0, false, 0.96, 6e-2}, KQuantCase{"Q5_1", DType::Q5_1, false, 0.97, 6e-2}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pocket
