// `pocket quantize` logic: the real stories260K (f32 llama2.c checkpoint)
// re-quantized to Pocket files, reopened and compared with the original.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/test_util.h"
#include "convert/quantize_model.h"
#include "formats/gguf.h"
#include "util/mapped_file.h"
#include "runtime/loader.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket {
namespace {

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy continuation through Model::forward; also returns every step's logits.
std::vector<int32_t> greedy(const Model& m, const std::vector<int32_t>& prompt, int n,
                            std::vector<std::vector<float>>* logits_out = nullptr) {
  ThreadPool pool(1);
  Context ctx(m.config(), 256);
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  m.forward(prompt, ctx, pool, logits.data());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    if (logits_out) logits_out->push_back(logits);
    int32_t t = argmax(logits);
    out.push_back(t);
    m.forward(std::span<const int32_t>(&t, 1), ctx, pool, logits.data());
  }
  return out;
}

// Logits of the original model along a fixed token sequence (teacher forcing),
// so quantized and original are compared at the same contexts.
std::vector<std::vector<float>> forced_logits(const Model& m, const std::vector<int32_t>& seq) {
  ThreadPool pool(1);
  Context ctx(m.config(), 256);
  std::vector<std::vector<float>> out;
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  for (int32_t t : seq) {
    m.forward(std::span<const int32_t>(&t, 1), ctx, pool, logits.data());
    out.push_back(logits);
  }
  return out;
}

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_FLOAT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_FLOAT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
}

class QuantizeStories : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    original_ = new LoadedModel(load_model(test::stories_model()));
    EncodeOptions eo;
    eo.add_bos = true;
    prompt_ = original_->tokenizer->encode("Once upon a time, a little girl", eo);
  }
  static void TearDownTestSuite() { delete original_; }

  LoadedModel quantized(convert::QuantizeOptions o) {
    std::string path = dir_.file("out.pocket");
    convert::quantize_model(test::stories_model(), path, o);
    return load_model(path);
  }

  static LoadedModel* original_;
  static std::vector<int32_t> prompt_;
  test::TempDir dir_;

  // Teacher-forced top-1 agreement with the f32 model along its own greedy
  // continuation of 60 tokens, and the relative RMS logit error.
  struct Agreement {
    int agree = 0;
    size_t positions = 0;
    double rel_rms = 0;
  };
  Agreement agreement(const LoadedModel& q) const {
    std::vector<int32_t> seq = prompt_;
    auto ref = greedy(*original_->model, prompt_, 60);
    seq.insert(seq.end(), ref.begin(), ref.end());
    auto la = forced_logits(*original_->model, seq);
    auto lb = forced_logits(*q.model, seq);
    Agreement r;
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < la.size(); ++i) {
      r.agree += argmax(la[i]) == argmax(lb[i]);
      for (size_t j = 0; j < la[i].size(); ++j) {
        err2 += (la[i][j] - lb[i][j]) * (la[i][j] - lb[i][j]);
        ref2 += la[i][j] * la[i][j];
      }
    }
    r.positions = la.size();
    r.rel_rms = std::sqrt(err2 / ref2);
    return r;
  }
};
LoadedModel* QuantizeStories::original_ = nullptr;
std::vector<int32_t> QuantizeStories::prompt_;

TEST_F(QuantizeStories, Q8KeepsConfigTokenizerAndGreedyTokens) {
  convert::QuantizeOptions o;
  o.weights = o.embed = DType::PQ8;
  LoadedModel q = quantized(o);
  EXPECT_EQ(q.file->format, "pocket");
  expect_same_config(original_->model->config(), q.model->config());
  EXPECT_EQ(q.file->get("blk.0.attn_q.weight").type, DType::PQ8);
  EXPECT_EQ(q.file->get("blk.0.attn_q.weight").group, 64);
  EXPECT_EQ(q.file->get("blk.0.attn_norm.weight").type, DType::F32);

  // Tokenizer: same pieces and the same ids/text for a sample string.
  const Vocab& va = original_->tokenizer->vocab();
  const Vocab& vb = q.tokenizer->vocab();
  EXPECT_EQ(va.tokens, vb.tokens);
  EXPECT_EQ(va.scores, vb.scores);
  EXPECT_EQ(va.bos_id, vb.bos_id);
  EXPECT_EQ(va.eos_ids, vb.eos_ids);
  const std::string text = "Lily saw a big red ball. She said, \"Can I play?\"";
  auto ids = original_->tokenizer->encode(text);
  EXPECT_EQ(q.tokenizer->encode(text), ids);
  EXPECT_EQ(q.tokenizer->decode(ids), original_->tokenizer->decode(ids));

  // Greedy equality does not hold: the PQ8 kernels also quantize the
  // activations to int8 per group, and stories260K's continuation meets a
  // close call after 17 tokens (measured: first 17 of 30 tokens equal). So
  // compare teacher-forced along the f32 model's own continuation: top-1
  // agreement >= 90% (measured 40/41), relative RMS logit error < 2%
  // (measured 1.0%) and max |diff| < 0.75 (measured 0.40; logits span about -10..15).
  auto ref = greedy(*original_->model, prompt_, 30);
  auto got = greedy(*q.model, prompt_, 30);
  EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + 10, got.begin())) << "first 10 greedy tokens";
  std::vector<int32_t> seq = prompt_;
  seq.insert(seq.end(), ref.begin(), ref.end());
  auto la = forced_logits(*original_->model, seq);
  auto lb = forced_logits(*q.model, seq);
  int agree = 0;
  float worst = 0;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    agree += argmax(la[i]) == argmax(lb[i]);
    for (size_t j = 0; j < la[i].size(); ++j) {
      worst = std::max(worst, std::fabs(la[i][j] - lb[i][j]));
      err2 += (la[i][j] - lb[i][j]) * (la[i][j] - lb[i][j]);
      ref2 += la[i][j] * la[i][j];
    }
  }
  std::printf("q8: top-1 agreement %d/%zu, relative RMS %.4f, max |diff| %.3f\n", agree, la.size(),
              std::sqrt(err2 / ref2), worst);
  EXPECT_GE(agree, static_cast<int>(0.9 * static_cast<double>(la.size()))) << agree << "/" << la.size();
  EXPECT_LT(std::sqrt(err2 / ref2), 0.02);
  EXPECT_LT(worst, 0.75f);
}


TEST_F(QuantizeStories, Q4AgreesOnMostTopTokens) {
  convert::QuantizeOptions o;  // defaults: q4 weights and embedding, group 64
  LoadedModel q = quantized(o);
  EXPECT_EQ(q.file->get("token_embd.weight").type, DType::PQ4);
  expect_same_config(original_->model->config(), q.model->config());

  // 4-bit weights of a 260K-parameter model flip some close calls, so
  // require at least 80% agreement (measured 61/71) and a relative RMS
  // logit error below 15% (measured 10.4%).
  const Agreement a = agreement(q);
  EXPECT_GE(a.agree, static_cast<int>(0.8 * static_cast<double>(a.positions))) << a.agree << "/" << a.positions;
  std::printf("q4: top-1 agreement %d/%zu, relative RMS %.4f\n", a.agree, a.positions, a.rel_rms);
  EXPECT_LT(a.rel_rms, 0.15) << "relative RMS logit error";
}

// PQ5 (32 levels, the same search as PQ4's) through the whole path: file,
// loader, every kernel of the forward pass. Its step is half PQ4's, so the
// logit error should be about half (measured: 66/71 top-1 agreement and
// 5.8% relative RMS error, against PQ4's 61/71 and 11.2%).
TEST_F(QuantizeStories, Q5HalvesTheQ4Error) {
  convert::QuantizeOptions o;
  const Agreement a4 = agreement(quantized(o));
  o.weights = o.embed = DType::PQ5;
  LoadedModel q = quantized(o);
  EXPECT_EQ(q.file->get("token_embd.weight").type, DType::PQ5);
  EXPECT_EQ(q.file->get("blk.0.ffn_down.weight").type, DType::PQ5);
  EXPECT_EQ(q.file->get("blk.0.ffn_down.weight").group, 64);
  expect_same_config(original_->model->config(), q.model->config());
  const Agreement a5 = agreement(q);
  std::printf("q5: top-1 agreement %d/%zu, relative RMS %.4f (q4: %d, %.4f)\n", a5.agree, a5.positions, a5.rel_rms,
              a4.agree, a4.rel_rms);
  EXPECT_GE(a5.agree, a4.agree);
  EXPECT_LT(a5.rel_rms, 0.6 * a4.rel_rms) << "relative RMS logit error";
}

TEST_F(QuantizeStories, F16AndOddGroupsWork) {
  convert::QuantizeOptions o;
  o.weights = DType::F16;
  o.embed = DType::F16;
  LoadedModel q = quantized(o);
  EXPECT_EQ(q.file->get("blk.0.ffn_down.weight").type, DType::F16);
  EXPECT_EQ(greedy(*q.model, prompt_, 30), greedy(*original_->model, prompt_, 30));

  // stories260K's FFN is 172 wide: ffn_down's rows do not divide by 128.
  o.weights = o.embed = DType::PQ8;
  o.group = 128;
  LoadedModel q128 = quantized(o);
  EXPECT_EQ(q128.file->get("blk.0.ffn_down.weight").group, 128);
  EXPECT_EQ(q128.file->get("blk.0.ffn_down.weight").cols() % 128 != 0, true);
}

TEST_F(QuantizeStories, KeepF32LeavesMatchingTensorsUnquantized) {
  convert::QuantizeOptions o;
  o.keep_f32 = {"ffn_down"};
  LoadedModel q = quantized(o);
  for (int l = 0; l < q.model->config().n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(q.file->get(p + "ffn_down.weight").type, DType::F32);
    EXPECT_EQ(q.file->get(p + "ffn_up.weight").type, DType::PQ4);
  }
  // The kept tensor holds the original values exactly.
  const TensorView& kept = q.file->get("blk.1.ffn_down.weight");
  const TensorView& orig = original_->file->get("blk.1.ffn_down.weight");
  ASSERT_EQ(kept.nbytes, orig.nbytes);
  EXPECT_EQ(std::memcmp(kept.data, orig.data, kept.nbytes), 0);
}

// --format gguf: a plain GGUF other engines read (llama.cpp, gguf-py):
// tokenizer.ggml.* instead of Pocket's compact tokenizer, no pocket.* keys,
// llama.cpp's default alignment. Reopened, it is the same model: the same
// tokens for a prompt and the same greedy continuation as the original.
TEST_F(QuantizeStories, PlainGgufHasNoPocketKeysAndIsTheSameModel) {
  convert::QuantizeOptions o;
  o.weights = o.embed = DType::F32;
  o.plain_gguf = true;
  const std::string path = dir_.file("plain.gguf");
  convert::quantize_model(test::stories_model(), path, o);
  const GgufFile g = GgufFile::parse(MappedFile::open(path));
  EXPECT_EQ(g.alignment(), 32u);
  for (const auto& [key, value] : g.metadata()) EXPECT_FALSE(key.starts_with("pocket.")) << key;
  EXPECT_EQ(g.get_string("tokenizer.ggml.model").value_or(""), "llama");
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens", true).size(), 512u);
  LoadedModel q = load_model(path);
  EXPECT_EQ(q.file->format, "gguf");
  expect_same_config(q.model->config(), original_->model->config());
  EncodeOptions eo;
  eo.add_bos = true;
  EXPECT_EQ(q.tokenizer->encode("Once upon a time, a little girl", eo), prompt_);
  EXPECT_EQ(greedy(*q.model, prompt_, 30), greedy(*original_->model, prompt_, 30));
  // F16 too; Pocket's own types are refused by name.
  o.weights = o.embed = DType::F16;
  convert::quantize_model(test::stories_model(), path, o);
  EXPECT_EQ(load_model(path).file->get("blk.0.ffn_down.weight").type, DType::F16);
  o.weights = DType::PQ4;
  try {
    convert::quantize_model(test::stories_model(), dir_.file("pq.gguf"), o);
    ADD_FAILURE() << "PQ4 weights in a plain GGUF were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--format gguf: tensor 'blk.0."), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("PQ4"), std::string::npos) << e.what();
  }
}

TEST(QuantizeErrors, BadOptionsAreClear) {
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] { convert::parse_weight_type("q3", "--weights"); }).find("--weights: 'q3'"), std::string::npos);
  EXPECT_NE(msg([] { convert::parse_weight_type("f32", "--embed", false); }).find("--embed"), std::string::npos);
  EXPECT_NE(msg([] { convert::parse_group(48, "--group"); }).find("48"), std::string::npos);
  test::TempDir dir;
  convert::QuantizeOptions o;
  EXPECT_NE(msg([&] { convert::quantize_model(dir.file("missing.bin"), dir.file("o"), o); }).find("missing.bin"),
            std::string::npos);
  o.group = 100;
  EXPECT_NE(msg([&] { convert::quantize_model(test::stories_model(), dir.file("o"), o); }).find("--group"),
            std::string::npos);
  o.source_grid = true;  // one PQ group per source block: 32 only
  o.group = 64;
  EXPECT_NE(msg([&] { convert::quantize_model(test::stories_model(), dir.file("o"), o); }).find("must be 32"),
            std::string::npos);
  o.group = 32;
  o.plain_gguf = true;
  EXPECT_NE(msg([&] { convert::quantize_model(test::stories_model(), dir.file("o"), o); }).find("--format gguf"),
            std::string::npos);
}

}  // namespace
}  // namespace pocket
