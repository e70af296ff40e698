// The real stories260K model (llama2.c checkpoint + tok512 tokenizer).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "generate/session.h"
#include "model/reference_model.h"
#include "runtime/loader.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

std::vector<int32_t> reference_greedy(const ModelFile& file, std::vector<int32_t> prompt, int n) {
  ReferenceModel ref(file);
  std::vector<int32_t> out;
  const std::vector<float>* logits = nullptr;
  for (int32_t t : prompt) logits = &ref.forward(t);
  for (int i = 0; i < n; ++i) {
    int32_t next = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    out.push_back(next);
    logits = &ref.forward(next);
  }
  return out;
}

TEST(Stories260K, GreedyContinuationMatchesReferenceAndGolden) {
  LoadedModel m = load_model(test::stories_model());
  EncodeOptions eo;
  eo.add_bos = true;
  auto prompt = m.tokenizer->encode("Once upon a time", eo);
  const int n = 100;
  auto ref = reference_greedy(*m.file, prompt, n);

  Session session(m.model, m.tokenizer, 512, 2);
  GenerateOptions opt;
  opt.max_tokens = n;
  opt.stop_at_eos = false;
  opt.sampling.temperature = 0;
  auto fast = session.generate(prompt, opt);
  EXPECT_EQ(fast.tokens, ref) << "fast: " << fast.text << "\nref:  " << m.tokenizer->decode(ref);

  // The committed golden output (tests/data/model/stories260k_greedy.json).
  auto golden = nlohmann::json::parse(read_text_file(pocket::test::test_data_dir() + "/model/stories260k_greedy.json"));
  EXPECT_EQ(prompt, golden["prompt_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(ref, golden["ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(fast.text, golden["text"].get<std::string>());
}

}  // namespace
}  // namespace pocket
