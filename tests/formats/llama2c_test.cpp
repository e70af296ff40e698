// llama2.c checkpoints: the real stories260K, writer round trips (legacy
// and version 1, shared and separate classifier), invalid files.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/format_test_util.h"
#include "formats/llama2c.h"
#include "formats/model_file.h"

namespace pocket::test {
namespace {

std::vector<float> floats_at(const std::vector<uint8_t>& file, uint64_t offset, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), file.data() + offset, n * 4);
  return v;
}

std::vector<float> tensor_floats(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

TEST(Llama2c, Stories260K) {
  ModelFile m = open_model(stories_model());  // tok512.bin sits next to it
  EXPECT_EQ(m.format, "llama2c");
  const ModelConfig& c = m.config;
  // Header values documented in shared/models/SOURCES.md.
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_EQ(c.rope_style, RopeStyle::Adjacent);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(m.file_size, 1056540u);

  ASSERT_TRUE(m.has_vocab);
  EXPECT_EQ(m.vocab.kind, TokenizerKind::SentencePieceBPE);
  EXPECT_EQ(m.vocab.tokens.size(), 512u);
  EXPECT_EQ(m.vocab.bos_id, 1);
  EXPECT_EQ(m.vocab.eos_id, 2);

  // Offsets computed from llama2.c's memory_map_weights, in floats after the
  // 28-byte header: emb 512*64, rms_att 5*64, wq 5*64*64, wk 5*32*64,
  // wv 5*32*64, wo 5*64*64, rms_ffn 5*64, w1/w2/w3 5*172*64 each, rms_final.
  const auto file = read_file(stories_model());
  const uint64_t h = 28, emb = 512 * 64, att = 5 * 64, wq = 5 * 64 * 64, wk = 5 * 32 * 64, ffn = 5 * 172 * 64;
  auto at = [&](uint64_t floats) { return h + 4 * floats; };
  EXPECT_EQ(tensor_floats(m.get("token_embd.weight")), floats_at(file, at(0), emb));
  EXPECT_EQ(tensor_floats(m.get("blk.0.attn_norm.weight")), floats_at(file, at(emb), 64));
  EXPECT_EQ(tensor_floats(m.get("blk.2.attn_k.weight")), floats_at(file, at(emb + att + wq + 2 * 32 * 64), 32 * 64));
  EXPECT_EQ(tensor_floats(m.get("blk.4.ffn_up.weight")),
            floats_at(file, at(emb + att + 2 * wq + 2 * wk + att + 2 * ffn + 4 * 172 * 64), 172 * 64));
  EXPECT_EQ(tensor_floats(m.get("output_norm.weight")), floats_at(file, at(emb + 2 * att + 2 * wq + 2 * wk + 3 * ffn), 64));
  EXPECT_EQ(m.get("blk.3.ffn_down.weight").shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(m.get("blk.3.attn_output.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(m.find("output.weight"), nullptr);

  // 264128 floats after the header, less the two 512 x 4 freq_cis tables.
  std::map<std::string, std::string> info(m.info.begin(), m.info.end());
  EXPECT_NE(info["parameters"].find("(260032)"), std::string::npos) << info["parameters"];
  EXPECT_EQ(info["tensor types"], "F32 x 47");  // embedding, final norm, 9 per layer
  EXPECT_EQ(info["format"], "llama2c");
  EXPECT_EQ(info["head dim"], "8");
}

class Llama2cRoundTrip : public ::testing::TestWithParam<std::tuple<Llama2cVersion, bool>> {};

TEST_P(Llama2cRoundTrip, TensorsSurvive) {
  auto [version, tied] = GetParam();
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  SyntheticWeights w = make_weights(c, tied, 13);
  write_llama2c(dir.file("m.bin"), c, w.views(), version);
  OpenOptions o;
  o.require_vocab = false;
  ModelFile m = open_model(dir.file("m.bin"), o);
  EXPECT_EQ(m.config.dim, c.dim);
  EXPECT_EQ(m.config.hidden_dim, c.hidden_dim);
  EXPECT_EQ(m.config.n_layers, c.n_layers);
  EXPECT_EQ(m.config.n_heads, c.n_heads);
  EXPECT_EQ(m.config.n_kv_heads, c.n_kv_heads);
  EXPECT_EQ(m.config.vocab_size, c.vocab_size);
  EXPECT_EQ(m.config.max_seq_len, c.max_seq_len);
  EXPECT_EQ(m.config.tied_embeddings, tied);
  ASSERT_EQ(m.tensors.size(), w.values.size());
  for (const auto& [name, values] : w.values) {
    SCOPED_TRACE(name);
    EXPECT_EQ(m.get(name).shape, w.shapes.at(name));
    EXPECT_EQ(tensor_floats(m.get(name)), values);  // fp32 is stored exactly
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, Llama2cRoundTrip,
                         ::testing::Combine(::testing::Values(Llama2cVersion::Legacy, Llama2cVersion::V1),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == Llama2cVersion::V1 ? "V1" : "Legacy") +
                                  (std::get<1>(info.param) ? "Shared" : "Separate");
                         });

TEST(Llama2c, SizeMismatchNamesBothSizes) {
  TempDir dir;
  auto b = read_file(stories_model());
  b.push_back(0);
  write_file(dir.file("s.bin"), b);
  std::string msg = error_of([&] { open_model(dir.file("s.bin")); });
  EXPECT_NE(msg.find("1056541"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1056540"), std::string::npos) << msg;
}

TEST(Llama2c, MissingTokenizerSaysWhereItLooked) {
  TempDir dir;
  std::filesystem::copy_file(stories_model(), dir.file("s.bin"));
  std::string msg = error_of([&] { open_model(dir.file("s.bin")); });
  EXPECT_NE(msg.find("tokenizer.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tok512.bin"), std::string::npos) << msg;

  OpenOptions o;
  o.tokenizer_path = stories_tokenizer();
  EXPECT_EQ(open_model(dir.file("s.bin"), o).vocab.tokens.size(), 512u);
  std::filesystem::copy_file(stories_tokenizer(), dir.file("tokenizer.bin"));
  EXPECT_TRUE(open_model(dir.file("s.bin")).has_vocab);
}

TEST(Llama2c, InvalidHeaders) {
  TempDir dir;
  auto with_header = [&](std::vector<int32_t> h) {
    auto b = read_file(stories_model());
    std::memcpy(b.data(), h.data(), 28);
    write_file(dir.file("h.bin"), b);
    return error_of([&] { open_model(dir.file("h.bin")); });
  };
  std::string msg = with_header({64, 172, 5, 8, 3, 512, 512});
  EXPECT_NE(msg.find("n_kv_heads"), std::string::npos) << msg;
  msg = with_header({64, 172, 5, 6, 3, 512, 512});
  EXPECT_NE(msg.find("multiple of n_heads"), std::string::npos) << msg;
  msg = with_header({64, 172, 0, 8, 4, 512, 512});
  EXPECT_NE(msg.find("not a recognised model file"), std::string::npos) << msg;
  msg = with_header({64, 172, 5, 8, 4, INT32_MIN, 512});
  EXPECT_NE(msg.find("not a recognised model file"), std::string::npos) << msg;
  msg = with_header({64, 172, 5, 8, 4, -512, 512});  // separate classifier: file too small
  EXPECT_NE(msg.find("implies"), std::string::npos) << msg;

  write_file(dir.file("text.bin"), std::string("Once upon a time there was a file that was not a model."));
  msg = error_of([&] { open_model(dir.file("text.bin")); });
  EXPECT_NE(msg.find("not a recognised model file"), std::string::npos) << msg;
  write_file(dir.file("empty.bin"), std::string());
  msg = error_of([&] { open_model(dir.file("empty.bin")); });
  EXPECT_NE(msg.find("not a recognised model file"), std::string::npos) << msg;
  msg = error_of([&] { open_model(dir.file("absent.bin")); });
  EXPECT_NE(msg.find("absent.bin"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pocket::test
