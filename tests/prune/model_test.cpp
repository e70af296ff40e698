// Guarantee (3): a pruned model's logits over kept tokens are the original's
// bit for bit (the token rows are copied, never recomputed), for each model
// format prune-vocab writes: Pocket (PQ4, PQ5 and PQ8 tiles), GGUF, and a Hugging
// Face folder; tied and untied output heads. The models are made by
// `pocket create --tokenizer` (convert::create_model) with a small real
// byte-level vocabulary.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "convert/create_model.h"
#include "convert/quantize_model.h"
#include "eval/perplexity.h"
#include "formats/gguf_writer.h"
#include "formats/hf_folder.h"
#include "formats/model_file.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "prune/prune.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kText = "the quick brown fox jumps over the lazy dog. Hello world, this is the test of the day.";

std::vector<float> logits_for(const std::shared_ptr<const ModelFile>& f, const std::vector<int32_t>& tokens) {
  Model model(f);
  ThreadPool pool(2);
  Context ctx(model.config(), 64);
  std::vector<float> all(tokens.size() * static_cast<size_t>(model.config().vocab_size));
  model.forward(tokens, ctx, pool, all.data(), /*all_logits=*/true);
  return all;
}

std::string make_pocket(const test::TempDir& dir, const std::string& preset, DType weights) {
  convert::CreateOptions o;
  o.preset = preset;
  o.weights = weights;
  o.tokenizer = test::gpt2_small_tokenizer();
  const std::string path = dir.file(preset + "-" + std::string(dtype_name(weights)) + ".pocket");
  convert::create_model(o, path);
  return path;
}

std::string make_gguf(const test::TempDir& dir, const std::string& pocket) {
  convert::QuantizeOptions q;
  q.plain_gguf = true;
  q.weights = q.embed = q.head = DType::F16;
  q.head_given = true;
  const std::string path = dir.file("plain.gguf");
  convert::quantize_model(pocket, path, q);
  return path;
}

// A Hugging Face folder holding the f16 weights of a Pocket file (in two
// shards with an index when `sharded`).
std::string make_hf(const test::TempDir& dir, const std::string& pocket, bool sharded = false) {
  const ModelFile f = open_model(pocket);
  const ModelConfig& c = f.config;
  const std::string hf = dir.file("hf");
  fs::create_directory(hf);
  std::vector<TensorView> views;
  for (const auto& [name, t] : f.tensors) {
    TensorView v = t;
    v.name = hf_tensor_name(name);
    views.push_back(v);
  }
  if (sharded) {
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    const size_t half = views.size() / 2;
    const std::vector<TensorView> a(views.begin(), views.begin() + static_cast<std::ptrdiff_t>(half)),
        b(views.begin() + static_cast<std::ptrdiff_t>(half), views.end());
    write_safetensors(hf + "/model-00001-of-00002.safetensors", a);
    write_safetensors(hf + "/model-00002-of-00002.safetensors", b);
    for (const auto& v : a) index["weight_map"][v.name] = "model-00001-of-00002.safetensors";
    for (const auto& v : b) index["weight_map"][v.name] = "model-00002-of-00002.safetensors";
    std::ofstream(hf + "/model.safetensors.index.json") << index.dump(2);
  } else {
    write_safetensors(hf + "/model.safetensors", views);
  }
  fs::copy_file(test::gpt2_small_tokenizer(), hf + "/tokenizer.json");
  std::ofstream(hf + "/config.json") << json{{"architectures", {c.arch == Arch::Qwen3 ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM"}},
                                             {"hidden_size", c.dim},
                                             {"intermediate_size", c.hidden_dim},
                                             {"num_hidden_layers", c.n_layers},
                                             {"num_attention_heads", c.n_heads},
                                             {"num_key_value_heads", c.n_kv_heads},
                                             {"head_dim", c.head_dim},
                                             {"max_position_embeddings", c.max_seq_len},
                                             {"rms_norm_eps", c.norm_eps},
                                             {"rope_theta", c.rope_theta},
                                             {"tie_word_embeddings", c.tied_embeddings},
                                             {"eos_token_id", c.vocab_size - 1},
                                             {"pad_token_id", 500},  // a normal token the corpus never uses
                                             {"vocab_size", c.vocab_size}}
                                                .dump(2);
  std::ofstream(hf + "/generation_config.json") << R"({"eos_token_id": [)" << c.vocab_size - 1 << "]}";
  std::ofstream(hf + "/added_tokens.json") << R"({"<|endoftext|>": )" << c.vocab_size - 1 << "}";
  std::ofstream(hf + "/special_tokens_map.json") << R"({"eos_token": "<|endoftext|>"})";
  std::ofstream(hf + "/vocab.json") << "{}";
  return hf;
}

// Prunes `in` to 400 tokens and compares the logits of every kept token at
// every position of a text made of kept tokens.
void expect_kept_logits_identical(const test::TempDir& dir, const std::string& in, const std::string& out) {
  std::ofstream(dir.file("corpus.txt")) << kText << "\n";
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("corpus.txt")};
  o.threads = 2;
  const auto report = prune::prune_vocab(in, out, o);
  const json map = json::parse(read_text_file(report.map_path));
  const auto new_to_old = map["new_to_old"].get<std::vector<int32_t>>();
  const auto old_to_new = map["old_to_new"].get<std::vector<int32_t>>();
  ASSERT_EQ(new_to_old.size(), 400u);

  auto before = std::make_shared<const ModelFile>(open_model(in));
  auto after = std::make_shared<const ModelFile>(open_model(out));
  EXPECT_EQ(after->config.vocab_size, 400);
  EXPECT_GT(before->config.vocab_size, 900);
  const auto old_ids = Tokenizer::create(before->vocab)->encode(kText);
  std::vector<int32_t> new_ids;
  for (int32_t id : old_ids) {
    ASSERT_GE(old_to_new[id], 0);
    new_ids.push_back(old_to_new[id]);
  }
  EXPECT_EQ(Tokenizer::create(after->vocab)->encode(kText), new_ids);

  const auto a = logits_for(before, old_ids), b = logits_for(after, new_ids);
  const size_t V = static_cast<size_t>(before->config.vocab_size), n = new_to_old.size();
  size_t differ = 0;
  for (size_t pos = 0; pos < old_ids.size(); ++pos)
    for (size_t k = 0; k < n; ++k)
      differ += std::memcmp(&a[pos * V + new_to_old[k]], &b[pos * n + k], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << "of " << old_ids.size() * n << " logits";
}

TEST(PruneModel, PocketFileTiedPq4) {
  test::TempDir dir;
  const std::string in = make_pocket(dir, "tiny-qwen3", DType::PQ4);
  expect_kept_logits_identical(dir, in, dir.file("pruned.pocket"));
  EXPECT_TRUE(fs::exists(dir.file("pruned.vocab_map.json")));
}

// PQ5: each row's fifth bits sit in 4 bytes of its sub-blocks' planes.
TEST(PruneModel, PocketFileTiedPq5) {
  test::TempDir dir;
  const std::string in = make_pocket(dir, "tiny-qwen3", DType::PQ5);
  expect_kept_logits_identical(dir, in, dir.file("pruned.pocket"));
}

TEST(PruneModel, PocketFileUntiedPq8) {
  test::TempDir dir;
  const std::string in = make_pocket(dir, "tiny-qwen2", DType::PQ8);
  ASSERT_FALSE(open_model(in).config.tied_embeddings);
  expect_kept_logits_identical(dir, in, dir.file("pruned.pocket"));
}

TEST(PruneModel, GgufFile) {
  test::TempDir dir;
  const std::string in = make_gguf(dir, make_pocket(dir, "tiny-qwen2", DType::F16));
  expect_kept_logits_identical(dir, in, dir.file("pruned.gguf"));
}

TEST(PruneModel, HuggingFaceFolder) {
  test::TempDir dir;
  const std::string in = make_hf(dir, make_pocket(dir, "tiny-qwen3", DType::F16));
  expect_kept_logits_identical(dir, in, dir.file("pruned"));
  const json cfg = json::parse(read_text_file(dir.file("pruned/config.json")));
  EXPECT_EQ(cfg["vocab_size"].get<int>(), 400);
  EXPECT_EQ(cfg["eos_token_id"].get<int>(), 399);  // <|endoftext|>, the last token, stays last
  const auto old_to_new =
      json::parse(read_text_file(dir.file("pruned/vocab_map.json")))["old_to_new"].get<std::vector<int32_t>>();
  EXPECT_GE(old_to_new[500], 0);  // named by config.json, so kept
  EXPECT_EQ(cfg["pad_token_id"].get<int>(), old_to_new[500]);
  EXPECT_EQ(json::parse(read_text_file(dir.file("pruned/generation_config.json")))["eos_token_id"], json::array({399}));
  EXPECT_EQ(json::parse(read_text_file(dir.file("pruned/added_tokens.json")))["<|endoftext|>"], 399);
  EXPECT_EQ(read_text_file(dir.file("pruned/special_tokens_map.json")), read_text_file(in + "/special_tokens_map.json"));
  EXPECT_TRUE(fs::exists(dir.file("pruned/tokenizer.json")));
  EXPECT_FALSE(fs::exists(dir.file("pruned/vocab.json")));
}

TEST(PruneModel, HuggingFaceFolderUntiedHead) {
  test::TempDir dir;
  const std::string in = make_hf(dir, make_pocket(dir, "tiny-qwen2", DType::F16));
  ASSERT_FALSE(open_model(in).config.tied_embeddings);
  expect_kept_logits_identical(dir, in, dir.file("pruned"));
}

TEST(PruneModel, HuggingFaceFolderInShards) {
  test::TempDir dir;
  const std::string in = make_hf(dir, make_pocket(dir, "tiny-qwen2", DType::F16), /*sharded=*/true);
  expect_kept_logits_identical(dir, in, dir.file("pruned"));
  const json before = json::parse(read_text_file(in + "/model.safetensors.index.json"));
  const json after = json::parse(read_text_file(dir.file("pruned/model.safetensors.index.json")));
  EXPECT_EQ(after["weight_map"], before["weight_map"]);
  uint64_t total = 0;
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    const SafetensorsFile st = SafetensorsFile::open(dir.file("pruned/") + shard);
    for (const auto& [name, t] : st.tensors()) total += t.nbytes;
  }
  EXPECT_EQ(after["metadata"]["total_size"].get<uint64_t>(), total);
}

TEST(PruneModel, NeverOverwritesTheInputModel) {
  test::TempDir dir;
  const std::string in = make_pocket(dir, "tiny-qwen3", DType::PQ4);
  const std::string original = read_text_file(in);
  std::ofstream(dir.file("corpus.txt")) << kText << "\n";
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("corpus.txt")};
  EXPECT_THROW(prune::prune_vocab(in, in, o), Error);
  EXPECT_EQ(read_text_file(in), original);
}

// A SentencePiece vocabulary with byte fallback (llama2.c's stories260K
// with tok512, written as GGUF): pruned like byte-level BPE, its kept
// logits bit for bit the original's; a SentencePiece tokenizer.json is a
// clear error (only model files carry SentencePiece vocabularies here).
TEST(PruneModel, ASentencePieceModel) {
  test::TempDir dir;
  const ModelFile l2c = open_model(test::stories_model());
  GgufWriter w;
  add_config_metadata(w, l2c.config);
  add_vocab_metadata(w, l2c.vocab, "");
  for (const auto& [name, t] : l2c.tensors) w.add_tensor(name, t.type, t.shape, t.data, t.nbytes);
  const std::string in = dir.file("stories.gguf"), out = dir.file("out.gguf");
  w.write(in);
  const char* text = "Once upon a time, there was a little girl named Lily. She liked to play.";
  std::ofstream(dir.file("corpus.txt")) << text << "\n";
  prune::PruneOptions o;
  o.keep = 400;
  o.corpus = {dir.file("corpus.txt")};
  const auto report = prune::prune_vocab(in, out, o);
  EXPECT_EQ(report.vocab_before, 512);
  EXPECT_EQ(report.vocab_after, 400);
  EXPECT_EQ(report.corpus_kept_tokens, report.corpus_tokens);
  const auto new_to_old = json::parse(read_text_file(report.map_path))["new_to_old"].get<std::vector<int32_t>>();
  auto before = std::make_shared<const ModelFile>(open_model(in));
  auto after = std::make_shared<const ModelFile>(open_model(out));
  EXPECT_EQ(after->config.vocab_size, 400);
  EXPECT_EQ(after->vocab.kind, TokenizerKind::SentencePieceBPE);
  const auto tb = Tokenizer::create(before->vocab), ta = Tokenizer::create(after->vocab);
  std::vector<int32_t> old_ids = tb->encode(text, {.add_bos = true}), new_ids;
  std::vector<int32_t> old_to_new(512, -1);
  for (size_t k = 0; k < new_to_old.size(); ++k) old_to_new[new_to_old[k]] = static_cast<int32_t>(k);
  for (int32_t id : old_ids) {
    ASSERT_GE(old_to_new[id], 0);
    new_ids.push_back(old_to_new[id]);
  }
  EXPECT_EQ(ta->encode(text, {.add_bos = true}), new_ids);
  EXPECT_EQ(ta->decode(ta->encode("Zebras quietly jumped! 你好")), "Zebras quietly jumped! 你好");
  const auto a = logits_for(before, old_ids), b = logits_for(after, new_ids);
  size_t differ = 0;
  for (size_t pos = 0; pos < old_ids.size(); ++pos)
    for (size_t k = 0; k < 400; ++k) differ += std::memcmp(&a[pos * 512 + new_to_old[k]], &b[pos * 400 + k], 4) != 0;
  EXPECT_EQ(differ, 0u);
  EXPECT_NE(read_text_file(in), read_text_file(out));

  // `pocket eval --ref-map` (eval::evaluate_mapped) on the same pair: the
  // reference renormalised over the kept tokens is the pruned model exactly.
  Model mb(before), ma(after);
  eval::EvalOptions eo;
  eo.ctx = 16;
  eo.threads = 2;
  eo.add_bos = true;
  eo.bos_id = after->vocab.bos_id;
  const auto text_ids = ta->encode(text);
  const auto r = eval::evaluate_mapped(ma, mb, text_ids, new_to_old, eo);
  EXPECT_TRUE(r.mapped);
  EXPECT_EQ(r.model.count, static_cast<int64_t>(text_ids.size()));
  EXPECT_EQ(r.kl_max, 0.0);
  EXPECT_EQ(r.model.sum, r.reference_kept.sum);
  EXPECT_GE(r.reference.sum, r.reference_kept.sum);
  EXPECT_GT(r.ref_dropped_mass_mean, 0.0);
  EXPECT_LT(r.ref_dropped_mass_max, 1.0);
  EXPECT_LE(r.top1_agreement, 1.0);
  std::vector<int32_t> bad_map = new_to_old;
  bad_map.pop_back();
  EXPECT_THROW(eval::evaluate_mapped(ma, mb, text_ids, bad_map, eo), Error);
}

}  // namespace
}  // namespace pocket
