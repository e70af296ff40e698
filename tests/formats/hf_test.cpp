// safetensors reader/writer and Hugging Face folders (single file, sharded
// with an index, real Qwen3 tokenizer), plus invalid inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/format_test_util.h"
#include "formats/hf_folder.h"
#include "formats/model_file.h"
#include "formats/safetensors.h"

namespace pocket::test {
namespace {

using nlohmann::json;

// Hugging Face name of a canonical tensor name (the inverse of the loader's
// mapping, written out independently here).
std::string hf_name(const std::string& canon) { return hf_tensor_name(canon); }

json hf_config(const ModelConfig& c, bool tie) {
  const char* arch = c.arch == Arch::Llama ? "LlamaForCausalLM" : c.arch == Arch::Qwen2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
  json j = {{"architectures", {arch}},
            {"hidden_size", c.dim},
            {"intermediate_size", c.hidden_dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"max_position_embeddings", c.max_seq_len},
            {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.norm_eps},
            {"tie_word_embeddings", tie},
            {"vocab_size", c.vocab_size},
            {"torch_dtype", "bfloat16"}};
  if (c.arch == Arch::Qwen3) j["head_dim"] = c.head_dim;
  return j;
}

// Encoded tensors (HF names) of the synthetic weights in one type.
struct HfTensors {
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::vector<TensorView> views(const SyntheticWeights& w, DType type, const std::vector<std::string>& names) const {
    std::vector<TensorView> v;
    for (const auto& canon : names) {
      TensorView t;
      t.name = hf_name(canon);
      t.type = type;
      t.shape = w.shapes.at(canon);
      t.data = bytes.at(canon).data();
      v.push_back(t);
    }
    return v;
  }
};

HfTensors encode_all(const SyntheticWeights& w, DType type) {
  HfTensors h;
  for (const auto& [name, values] : w.values) h.bytes[name] = ref_encode(type, values);
  return h;
}

std::vector<std::string> names_of(const SyntheticWeights& w) {
  std::vector<std::string> n;
  for (const auto& [name, v] : w.values) n.push_back(name);
  return n;
}

void expect_weights(const ModelFile& m, const SyntheticWeights& w, DType type) {
  for (const auto& [name, values] : w.values) {
    SCOPED_TRACE(name);
    const TensorView* t = m.find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, type);
    EXPECT_EQ(t->shape, w.shapes.at(name));
    std::vector<float> got = ref_decode(type, t->data, values.size());
    for (size_t i = 0; i < values.size(); ++i) ASSERT_NEAR(got[i], values[i], tolerance(type)) << "element " << i;
  }
}

OpenOptions no_vocab() {
  OpenOptions o;
  o.require_vocab = false;
  return o;
}

class SafetensorsRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsRoundTrip, SingleFile) {
  const DType type = GetParam();
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  SyntheticWeights w = make_weights(c, false, 21);
  HfTensors h = encode_all(w, type);
  write_safetensors(dir.file("x.safetensors"), h.views(w, type, names_of(w)), {{"format", "pt"}});

  SafetensorsFile f = SafetensorsFile::open(dir.file("x.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), w.values.size());
  for (const auto& [canon, values] : w.values) {
    SCOPED_TRACE(canon);
    const TensorView& t = f.tensors().at(hf_name(canon));
    EXPECT_EQ(t.type, type);
    EXPECT_EQ(t.shape, w.shapes.at(canon));
    ASSERT_EQ(t.nbytes, h.bytes[canon].size());
    EXPECT_EQ(std::memcmp(t.data, h.bytes[canon].data(), t.nbytes), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SafetensorsRoundTrip, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(HfFolder, Qwen2SingleFileTiedByConfig) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen2);
  SyntheticWeights w = make_weights(c, /*tied=*/false, 4);  // lm_head present but tie_word_embeddings wins
  HfTensors h = encode_all(w, DType::F32);
  // An extra 3-element F16 tensor first leaves every F32 tensor after it
  // 2-byte aligned: the loader must hand out aligned copies.
  const uint16_t extra[3] = {f32_to_f16(1.0f), f32_to_f16(2.0f), f32_to_f16(3.0f)};
  std::vector<TensorView> views = h.views(w, DType::F32, names_of(w));
  views.insert(views.begin(), TensorView{"model.extra_head.weight", DType::F16, {3}, extra, 6, 0});
  write_safetensors(dir.file("model.safetensors"), views);
  write_file(dir.file("config.json"), hf_config(c, /*tie=*/true).dump());

  for (const std::string& path : {dir.path(), dir.file("model.safetensors")}) {
    SCOPED_TRACE(path);
    ModelFile m = open_model(path, no_vocab());
    EXPECT_EQ(m.format, "hf");
    EXPECT_EQ(m.config.arch, Arch::Qwen2);
    EXPECT_EQ(m.config.rope_style, RopeStyle::Halves);
    EXPECT_EQ(m.config.dim, c.dim);
    EXPECT_EQ(m.config.hidden_dim, c.hidden_dim);
    EXPECT_EQ(m.config.n_layers, c.n_layers);
    EXPECT_EQ(m.config.n_heads, c.n_heads);
    EXPECT_EQ(m.config.n_kv_heads, c.n_kv_heads);
    EXPECT_EQ(m.config.head_dim, c.dim / c.n_heads);
    EXPECT_EQ(m.config.max_seq_len, c.max_seq_len);
    EXPECT_FLOAT_EQ(m.config.rope_theta, c.rope_theta);
    EXPECT_FLOAT_EQ(m.config.norm_eps, c.norm_eps);
    EXPECT_TRUE(m.config.tied_embeddings);
    EXPECT_TRUE(m.config.qkv_bias);
    EXPECT_FALSE(m.config.qk_norm);
    EXPECT_EQ(m.find("output.weight"), nullptr);
    w.values.erase("output.weight");
    expect_weights(m, w, DType::F32);
    for (const auto& [name, t] : m.tensors)
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_block_bytes(t.type), 0u) << name;
    const TensorView& e = m.get("model.extra_head.weight");  // unknown names are kept as they are
    EXPECT_EQ(ref_decode(DType::F16, e.data, 3), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  }
}

TEST(HfFolder, Qwen3ShardedWithIndex) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen3);
  SyntheticWeights w = make_weights(c, /*tied=*/false, 8);
  HfTensors h = encode_all(w, DType::BF16);
  std::vector<std::string> all = names_of(w), first, second;
  for (size_t i = 0; i < all.size(); ++i) (i % 2 ? second : first).push_back(all[i]);
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), h.views(w, DType::BF16, first));
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), h.views(w, DType::BF16, second));
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const auto& n : first) index["weight_map"][hf_name(n)] = "model-00001-of-00002.safetensors";
  for (const auto& n : second) index["weight_map"][hf_name(n)] = "model-00002-of-00002.safetensors";
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  write_file(dir.file("config.json"), hf_config(c, false).dump());

  ModelFile m = open_model(dir.path(), no_vocab());
  EXPECT_EQ(m.config.arch, Arch::Qwen3);
  EXPECT_EQ(m.config.head_dim, 32);
  EXPECT_EQ(m.config.q_dim(), 128);
  EXPECT_FALSE(m.config.tied_embeddings);
  EXPECT_FALSE(m.config.qkv_bias);
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.mappings.size(), 2u);
  EXPECT_EQ(m.file_size, read_file(dir.file("model-00001-of-00002.safetensors")).size() +
                             read_file(dir.file("model-00002-of-00002.safetensors")).size());
  expect_weights(m, w, DType::BF16);

  // An index naming a tensor its shard does not hold.
  index["weight_map"]["model.norm.weight"] = first.front() == "output_norm.weight" ? "model-00002-of-00002.safetensors"
                                                                                  : "model-00001-of-00002.safetensors";
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  EXPECT_NE(error_of([&] { open_model(dir.path(), no_vocab()); }).find("model.norm.weight"), std::string::npos);
  // Shard names must stay inside the folder.
  index["weight_map"]["model.norm.weight"] = "../model.safetensors";
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  EXPECT_NE(error_of([&] { open_model(dir.path(), no_vocab()); }).find("../model.safetensors"), std::string::npos);
}

TEST(HfFolder, RealQwen3Tokenizer) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen3);
  c.dim = 16, c.hidden_dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 8;
  c.vocab_size = 151936;
  SyntheticWeights w = make_weights(c, true, 2);
  HfTensors h = encode_all(w, DType::BF16);
  write_safetensors(dir.file("model.safetensors"), h.views(w, DType::BF16, names_of(w)));
  write_file(dir.file("config.json"), hf_config(c, true).dump());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::create_symlink(qwen3_tokenizer_dir() + "/" + f, dir.file(f));

  ModelFile m = open_model(dir.path());
  ASSERT_TRUE(m.has_vocab);
  EXPECT_EQ(m.vocab.kind, TokenizerKind::ByteLevelBPE);
  EXPECT_EQ(m.vocab.tokens.size(), 151669u);
  EXPECT_EQ(m.vocab.tokens[151645], "<|im_end|>");
  EXPECT_NE(std::find(m.vocab.eos_ids.begin(), m.vocab.eos_ids.end(), 151645), m.vocab.eos_ids.end());
  EXPECT_NE(m.chat_template.find("<|im_start|>"), std::string::npos);
}

TEST(HfFolder, Errors) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  SyntheticWeights w = make_weights(c, true, 6);
  HfTensors h = encode_all(w, DType::F16);
  write_safetensors(dir.file("model.safetensors"), h.views(w, DType::F16, names_of(w)));
  json cfg = hf_config(c, true);
  write_file(dir.file("config.json"), cfg.dump());
  EXPECT_NO_THROW(open_model(dir.path(), no_vocab()));

  std::string msg = error_of([&] { open_model(dir.path()); });
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;

  auto with_config = [&](const std::function<void(json&)>& edit) {
    json j = cfg;
    edit(j);
    write_file(dir.file("config.json"), j.dump());
    return error_of([&] { open_model(dir.path(), no_vocab()); });
  };
  msg = with_config([](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
  EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
  msg = with_config([](json& j) { j.erase("hidden_size"); });
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  msg = with_config([](json& j) { j["num_key_value_heads"] = 3; });
  EXPECT_NE(msg.find("n_kv_heads"), std::string::npos) << msg;
  msg = with_config([](json& j) { j["intermediate_size"] = 100; });
  EXPECT_NE(msg.find("ffn_gate.weight"), std::string::npos) << msg;
  msg = with_config([](json& j) { j["rope_theta"] = 1e300; });
  EXPECT_NE(msg.find("rope_theta"), std::string::npos) << msg;
  msg = with_config([](json& j) { j["hidden_size"] = "64"; });
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  write_file(dir.file("config.json"), std::string("{not json"));
  msg = error_of([&] { open_model(dir.path(), no_vocab()); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
}

// Hand-written safetensors files with a bad header.
std::string safetensors_error(const TempDir& dir, const std::string& header, size_t data_bytes,
                              uint64_t declared_len = 0) {
  std::vector<uint8_t> b(8);
  uint64_t n = declared_len ? declared_len : header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  write_file(dir.file("bad.safetensors"), b);
  return error_of([&] { SafetensorsFile::open(dir.file("bad.safetensors")); });
}

TEST(SafetensorsHostile, BadHeaders) {
  TempDir dir;
  auto has = [](const std::string& msg, const char* what) {
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  has(safetensors_error(dir, R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16), "I64");
  has(safetensors_error(dir, R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16), "'w'");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 16), "need 8");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16), "after end");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 16), "past the data");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 16), "non-negative");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", 16),
      "overflow");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[2199023255552],"data_offsets":[0,4]}})", 16),
      "too large");
  has(safetensors_error(dir, R"({"w":{"dtype":"F32","shape":[2]}})", 16), "data_offsets");
  has(safetensors_error(dir, R"([1,2])", 16), "not a JSON object");
  has(safetensors_error(dir, R"({"w":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]})", 16), "nests deeper");
  has(safetensors_error(dir, "{}", 0, 1ull << 62), "exceeds the file size");
  has(safetensors_error(dir, "{\"w\":", 0), "not valid JSON");
  has(safetensors_error(dir, "", 0, 0), "not valid JSON");
}

TEST(HfNames, CanonicalMapping) {
  EXPECT_EQ(canonical_hf_name("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(canonical_hf_name("model.layers.0.self_attn.k_norm.weight"), "blk.0.attn_k_norm.weight");
  EXPECT_EQ(canonical_hf_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(canonical_hf_name("model.layers.x.mlp.down_proj.weight"), "");
  EXPECT_EQ(canonical_hf_name("model.layers.01.mlp.down_proj.weight"), "");
  EXPECT_EQ(canonical_hf_name("model.layers.1.mlp.other.weight"), "");
  EXPECT_EQ(canonical_hf_name("model.layers.99999999999999999999.mlp.up_proj.weight"), "");
}

}  // namespace
}  // namespace pocket::test
