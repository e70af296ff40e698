// Robustness: real and written model files mutated byte by byte and
// truncated at many points. Every open must either succeed or throw
// pocket::Error: no crash, no other exception, no absurd allocation (the
// sanitizer build turns out-of-bounds reads and huge allocations into
// failures). A truncated file must always be rejected.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/gguf_kquant_pack.h"
#include "formats/format_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/model_file.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"

namespace pocket::test {
namespace {

// Runs `f`: true if it returned, false if it threw pocket::Error; any
// other exception fails the test.
template <class F>
bool attempt(F&& f, const std::string& what) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-pocket exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": threw an unknown exception";
  }
  return false;
}

using TryOpen = std::function<bool(const std::string& what)>;

TryOpen model_opener(const std::string& path, OpenOptions opts = {}) {
  return [=](const std::string& what) { return attempt([&] { open_model(path, opts); }, what); };
}

void put_byte(int fd, uint64_t pos, uint8_t v) {
  ASSERT_EQ(pwrite(fd, &v, 1, static_cast<off_t>(pos)), 1);
}

// All offsets in [0, dense_end) plus `spread` offsets spread over the rest.
std::vector<uint64_t> positions(uint64_t size, uint64_t dense_end, int spread) {
  std::vector<uint64_t> p;
  for (uint64_t i = 0; i < std::min(dense_end, size); ++i) p.push_back(i);
  if (size > dense_end)
    for (int i = 0; i < spread; ++i) p.push_back(dense_end + (size - dense_end) * static_cast<uint64_t>(i) / spread);
  return p;
}

struct Counts {
  int opened = 0, rejected = 0;
};

// Overwrites each position of `path` with several values in turn (restoring
// it after each), opening the file every time. `path` must be a scratch copy.
Counts mutate_each(const std::string& path, const std::vector<uint64_t>& pos, const TryOpen& try_open) {
  const std::vector<uint8_t> orig = read_file(path);
  int fd = ::open(path.c_str(), O_WRONLY);
  EXPECT_GE(fd, 0);
  Counts n;
  for (uint64_t p : pos) {
    const uint8_t b = orig[p];
    // Extremes, a low bit (counts, lengths) and the sign bit.
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t(b ^ 0x01), uint8_t(b ^ 0x80)}) {
      if (v == b) continue;
      put_byte(fd, p, v);
      (try_open("byte " + std::to_string(p) + " = " + std::to_string(v)) ? n.opened : n.rejected)++;
    }
    put_byte(fd, p, b);
    if (::testing::Test::HasFailure()) break;  // one report is enough
  }
  ::close(fd);
  return n;
}

// Cuts `path` (a scratch copy) down to each length, longest first.
void truncate_each(const std::string& path, std::vector<uint64_t> lengths, const TryOpen& try_open) {
  const uint64_t size = read_file(path).size();
  std::sort(lengths.rbegin(), lengths.rend());
  for (uint64_t len : lengths) {
    if (len >= size) continue;
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(len)), 0);
    EXPECT_FALSE(try_open("truncated to " + std::to_string(len))) << "truncated to " << len << " bytes opened";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Robustness, Stories260K) {
  TempDir dir;
  const std::string path = dir.file("stories260K.bin");
  std::filesystem::copy_file(stories_model(), path);
  std::filesystem::copy_file(stories_tokenizer(), dir.file("tok512.bin"));
  const TryOpen try_open = model_opener(path);
  ASSERT_TRUE(try_open("original"));
  const uint64_t size = read_file(path).size();

  Counts n = mutate_each(path, positions(size, 28, 64), try_open);
  // Weight bytes are plain floats: those mutations must still open.
  EXPECT_GE(n.opened, 64 * 3);
  EXPECT_GT(n.rejected, 0);
  truncate_each(path, positions(size, 64, 64), try_open);
}

// A small Qwen2-shaped GGUF with a tokenizer and quantized tensors: Q8_0
// and Q4_0, or (kquants) llama.cpp's block types on a 256-wide shape.
// Returns the offset of the data section.
uint64_t write_test_gguf(const std::string& path, bool kquants = false) {
  ModelConfig c = small_config(Arch::Qwen2);
  c.n_layers = 1;
  c.vocab_size = 16;
  if (kquants) {  // K-quant rows are whole 256-element super-blocks
    c.dim = c.hidden_dim = 256;
    c.head_dim = 64;
  }
  SyntheticWeights w = make_weights(c, false, 17);
  Vocab v;
  v.kind = TokenizerKind::ByteLevelBPE;
  v.pre = PreTokenizer::Qwen2;
  for (int i = 0; i < 14; ++i) v.tokens.push_back(std::string(1, static_cast<char>('a' + i)));
  v.tokens.push_back("ab");
  v.tokens.push_back("<|im_end|>");
  v.types.assign(v.tokens.size(), TokenType::Normal);
  v.types.back() = TokenType::Control;
  v.merges = {{"a", "b"}};
  v.eos_id = 15;
  GgufWriter g;
  add_config_metadata(g, c);
  add_vocab_metadata(g, v, "{% for m in messages %}{{ m.content }}{% endfor %}");
  std::map<std::string, std::vector<uint8_t>> bytes;  // must outlive write()
  const DType kinds[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                         DType::Q8_K, DType::Q4_1, DType::Q5_0, DType::Q5_1};
  int i = 0;
  for (const auto& [name, values] : w.values) {
    const auto& shape = w.shapes.at(name);
    if (kquants && shape.size() == 2) {
      DType t = kinds[i++ % std::size(kinds)];
      bytes[name] = quantize_k(t, values.data(), shape[0], shape[1]);
      g.add_tensor(name, t, shape, bytes[name].data(), bytes[name].size());
      continue;
    }
    DType t = shape.size() == 1 ? DType::F32 : (i++ % 2 ? DType::Q8_0 : DType::Q4_0);
    bytes[name] = ref_encode(t, values);
    g.add_tensor(name, t, shape, bytes[name].data(), bytes[name].size());
  }
  g.write(path);
  GgufFile f = GgufFile::parse(MappedFile::open(path));
  uint64_t data_start = ~0ull;
  for (const auto& t : f.tensors())
    data_start = std::min<uint64_t>(data_start, static_cast<const uint8_t*>(f.tensor_data(t)) - f.mapping()->data());
  return data_start;
}

TEST(Robustness, Gguf) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  const uint64_t data_start = write_test_gguf(path);
  const TryOpen try_open = model_opener(path);
  ASSERT_TRUE(try_open("original"));
  const uint64_t size = read_file(path).size();

  // Every byte of the header, metadata and tensor infos; a sample of the data.
  Counts n = mutate_each(path, positions(size, data_start, 128), try_open);
  EXPECT_GT(n.opened, 128 * 3);
  EXPECT_GT(n.rejected, 1000);
  truncate_each(path, positions(size, data_start + 64, 128), try_open);
}

// The same with every llama.cpp block type: mutated tensor infos (type ids,
// dims, offsets) and truncations must all be rejected or open cleanly, and
// every tensor that opens must dequantize (the sanitizer build checks the
// reads stay inside the mapping).
TEST(Robustness, GgufKQuants) {
  TempDir dir;
  const std::string path = dir.file("k.gguf");
  const uint64_t data_start = write_test_gguf(path, /*kquants=*/true);
  const TryOpen try_open = [&](const std::string& what) {
    return attempt(
        [&] {
          ModelFile m = open_model(path);
          std::vector<float> row;
          for (const auto& [name, t] : m.tensors) {
            TensorView v = t;
            if (v.shape.size() == 1) v.shape = {1, v.shape[0]};
            row.resize(static_cast<size_t>(v.cols()));
            kernels::dequant_row(v, v.rows() - 1, row.data());  // the last row ends the tensor's bytes
          }
        },
        what);
  };
  ASSERT_TRUE(try_open("original"));
  const uint64_t size = read_file(path).size();
  // The tensor infos sit at the end of the header: cover them densely.
  const uint64_t infos = data_start > 1200 ? data_start - 1200 : 0;
  std::vector<uint64_t> pos;
  for (uint64_t p : positions(size, data_start, 64))
    if (p >= infos) pos.push_back(p);
  Counts n = mutate_each(path, pos, try_open);
  EXPECT_GT(n.opened, 64 * 3);
  EXPECT_GT(n.rejected, 200);
  truncate_each(path, positions(size, 0, 128), try_open);
}

// A Pocket file: PQ tensors, group size and the compact tokenizer blob.
TEST(Robustness, PocketFile) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen3);
  c.n_layers = 1;
  c.vocab_size = 512;
  SyntheticWeights w = make_weights(c, true, 23);
  auto blob = Tokenizer::create(vocab_from_llama2c(stories_tokenizer(), 512))->serialize();
  GgufWriter g;
  add_config_metadata(g, c);
  g.set_u32("pocket.version", kPocketFileVersion);
  g.set("pocket.tokenizer", GgufMeta::bytes(blob.data(), blob.size()));
  std::map<std::string, std::vector<uint8_t>> bytes;  // must outlive write()
  for (const auto& [name, values] : w.values) {
    const auto& shape = w.shapes.at(name);
    if (shape.size() == 1) {
      g.add_tensor(name, DType::F32, shape, values.data(), values.size() * 4);
      continue;
    }
    auto& b = bytes[name];
    b.assign(tensor_nbytes(DType::PQ4, shape, 32, name), 0x11);
    g.add_tensor(name, DType::PQ4, shape, b.data(), b.size(), 32);
  }
  const std::string path = dir.file("m.pocket");
  g.write(path);
  const TryOpen try_open = model_opener(path);
  ASSERT_TRUE(try_open("original"));
  const uint64_t size = read_file(path).size();
  // Dense over the fixed header and the first keys, then a spread that
  // covers the tokenizer blob, the tensor infos and the data.
  Counts n = mutate_each(path, positions(size, 256, 600), try_open);
  EXPECT_GT(n.opened, 0);
  EXPECT_GT(n.rejected, 300);
  truncate_each(path, positions(size, 256, 128), try_open);
}

TEST(Robustness, Safetensors) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  c.n_layers = 1;
  SyntheticWeights w = make_weights(c, true, 19);
  std::vector<TensorView> views;
  std::map<std::string, std::string> hf = {{"token_embd.weight", "model.embed_tokens.weight"},
                                           {"output_norm.weight", "model.norm.weight"},
                                           {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
                                           {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
                                           {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
                                           {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
                                           {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
                                           {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
                                           {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
                                           {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"},
                                           {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"}};
  for (auto [canon, t] : w.views()) {
    t.name = hf.at(canon);
    views.push_back(t);
  }
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, views);
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", c.dim},
                        {"intermediate_size", c.hidden_dim},      {"num_hidden_layers", c.n_layers},
                        {"num_attention_heads", c.n_heads},       {"num_key_value_heads", c.n_kv_heads},
                        {"vocab_size", c.vocab_size},             {"tie_word_embeddings", true}};
  write_file(dir.file("config.json"), cfg.dump());

  uint64_t header_len;
  std::memcpy(&header_len, read_file(path).data(), 8);
  const uint64_t size = read_file(path).size();
  // The whole folder, without a tokenizer.
  OpenOptions no_vocab;
  no_vocab.require_vocab = false;
  const TryOpen try_open = model_opener(dir.path(), no_vocab);
  ASSERT_TRUE(try_open("original"));
  Counts n = mutate_each(path, positions(size, 8 + header_len, 64), try_open);
  EXPECT_GT(n.opened, 64 * 3);
  EXPECT_GT(n.rejected, 1000);
  truncate_each(path, positions(size, 8 + header_len + 16, 64), try_open);
}

// Inputs that made a fuzz target (fuzz/, docs/reliability.md) crash, kept
// as files named <target>-<what>: each must now be opened the way that
// target (and the CLI) opens it and give a result or one pocket::Error, with
// no sanitizer report (this test runs in the ASan+UBSan build too).
TEST(Robustness, FuzzRegressions) {
  const std::string dir = test_data_dir() + "/formats/fuzz-regressions";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    if (name.rfind("README", 0) == 0) continue;
    ++files;
    if (name.rfind("gguf-", 0) == 0) {
      attempt(
          [&] {
            OpenOptions o;
            o.require_vocab = false;
            ModelFile f = open_model(path, o);
            if (f.has_vocab && !f.tokenizer) Tokenizer::create(f.vocab);
          },
          name);
    } else {
      ADD_FAILURE() << name << ": no fuzz target of that name prefix";
    }
  }
  EXPECT_GT(files, 0u);
}

}  // namespace
}  // namespace pocket::test
