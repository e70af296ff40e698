// GGUF reader/writer: round trips of every tensor type, config and
// tokenizer metadata, Pocket files, and hand-made hostile files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include "formats/format_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/model_file.h"
#include "kernels/kernels.h"
#include "util/mapped_file.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"

namespace pocket::test {
namespace {

struct Encoded {
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::map<std::string, DType> types;
};

// Writes `w` with 2-D weights as `type` and 1-D tensors as F32.
Encoded write_gguf_model(const std::string& path, const ModelConfig& c, const SyntheticWeights& w, DType type,
                         const Vocab* vocab = nullptr, uint32_t alignment = 32) {
  Encoded e;
  GgufWriter g(alignment);
  add_config_metadata(g, c);
  if (vocab) add_vocab_metadata(g, *vocab, "{{ messages }}");
  for (const auto& [name, values] : w.values) {
    const auto& shape = w.shapes.at(name);
    DType t = shape.size() == 2 ? type : DType::F32;
    e.bytes[name] = ref_encode(t, values);
    e.types[name] = t;
  }
  for (const auto& [name, b] : e.bytes) g.add_tensor(name, e.types[name], w.shapes.at(name), b.data(), b.size());
  g.write(path);
  return e;
}

Vocab byte_level_vocab() {
  Vocab v;
  v.kind = TokenizerKind::ByteLevelBPE;
  v.pre = PreTokenizer::Qwen2;
  v.tokens = {"a", "b", "ab", "Ġ", "Ġab", "<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  v.types.assign(v.tokens.size(), TokenType::Normal);
  v.types[5] = v.types[6] = v.types[7] = TokenType::Control;
  v.merges = {{"a", "b"}, {"Ġ", "ab"}};
  v.eos_id = 5;
  v.pad_id = 5;
  return v;
}

class GgufRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(GgufRoundTrip, TensorsAndConfigSurvive) {
  const DType type = GetParam();
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  SyntheticWeights w = make_weights(c, /*tied=*/false, 7);
  const std::string path = dir.file("m.gguf");
  Encoded e = write_gguf_model(path, c, w, type);

  OpenOptions o;
  o.require_vocab = false;
  ModelFile m = open_model(path, o);
  EXPECT_EQ(m.format, "gguf");
  EXPECT_EQ(m.config.arch, Arch::Llama);
  EXPECT_EQ(m.config.rope_style, RopeStyle::Adjacent);
  EXPECT_EQ(m.config.dim, c.dim);
  EXPECT_EQ(m.config.hidden_dim, c.hidden_dim);
  EXPECT_EQ(m.config.n_layers, c.n_layers);
  EXPECT_EQ(m.config.n_heads, c.n_heads);
  EXPECT_EQ(m.config.n_kv_heads, c.n_kv_heads);
  EXPECT_EQ(m.config.head_dim, c.head_dim);
  EXPECT_EQ(m.config.vocab_size, c.vocab_size);
  EXPECT_EQ(m.config.max_seq_len, c.max_seq_len);
  EXPECT_FLOAT_EQ(m.config.rope_theta, c.rope_theta);
  EXPECT_FLOAT_EQ(m.config.norm_eps, c.norm_eps);
  EXPECT_FALSE(m.config.tied_embeddings);
  EXPECT_FALSE(m.config.qkv_bias);
  EXPECT_FALSE(m.config.qk_norm);
  EXPECT_FALSE(m.has_vocab);
  EXPECT_EQ(m.file_size, read_file(path).size());

  ASSERT_EQ(m.tensors.size(), w.values.size());
  for (const auto& [name, values] : w.values) {
    SCOPED_TRACE(name);
    const TensorView& t = m.get(name);
    EXPECT_EQ(t.type, e.types[name]);
    EXPECT_EQ(t.shape, w.shapes.at(name));
    ASSERT_EQ(t.nbytes, e.bytes[name].size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << "tensor data must honour the 32-byte alignment";
    EXPECT_EQ(std::memcmp(t.data, e.bytes[name].data(), t.nbytes), 0);
    std::vector<float> got = ref_decode(t.type, t.data, values.size());
    const float tol = tolerance(t.type);
    for (size_t i = 0; i < values.size(); ++i) ASSERT_NEAR(got[i], values[i], tol) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GgufRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Gguf, Qwen2AndQwen3FlagsComeFromTensors) {
  for (Arch arch : {Arch::Qwen2, Arch::Qwen3}) {
    SCOPED_TRACE(arch_name(arch));
    TempDir dir;
    ModelConfig c = small_config(arch);
    SyntheticWeights w = make_weights(c, /*tied=*/true, 3);
    Vocab v = byte_level_vocab();
    write_gguf_model(dir.file("q.gguf"), c, w, DType::F16, &v);
    ModelFile m = open_model(dir.file("q.gguf"));
    EXPECT_EQ(m.config.arch, arch);
    EXPECT_EQ(m.config.rope_style, RopeStyle::Halves);
    EXPECT_TRUE(m.config.tied_embeddings);
    EXPECT_EQ(m.config.qkv_bias, arch == Arch::Qwen2);
    EXPECT_EQ(m.config.qk_norm, arch == Arch::Qwen3);
    EXPECT_EQ(m.config.head_dim, c.head_dim);
    EXPECT_EQ(m.config.q_dim(), arch == Arch::Qwen3 ? 128 : 64);
    EXPECT_EQ(m.find("output.weight"), nullptr);
    EXPECT_EQ(m.chat_template, "{{ messages }}");
  }
}

TEST(Gguf, ByteLevelVocabRoundTrip) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen2);
  SyntheticWeights w = make_weights(c, true, 5);
  Vocab v = byte_level_vocab();
  write_gguf_model(dir.file("v.gguf"), c, w, DType::F32, &v);
  ModelFile m = open_model(dir.file("v.gguf"));
  ASSERT_TRUE(m.has_vocab);
  const Vocab& r = m.vocab;
  EXPECT_EQ(r.kind, TokenizerKind::ByteLevelBPE);
  EXPECT_EQ(r.pre, PreTokenizer::Qwen2);
  EXPECT_TRUE(r.nfc);
  EXPECT_FALSE(r.add_bos);
  EXPECT_EQ(r.tokens, v.tokens);
  EXPECT_EQ(r.types, v.types);
  EXPECT_EQ(r.merges, v.merges);
  EXPECT_EQ(r.eos_id, 5);
  EXPECT_EQ(r.pad_id, 5);
  EXPECT_EQ(r.bos_id, -1);
  // <|endoftext|> (the eos) and <|im_end|> end generation; <|im_start|> does not.
  EXPECT_NE(std::find(r.eos_ids.begin(), r.eos_ids.end(), 5), r.eos_ids.end());
  EXPECT_NE(std::find(r.eos_ids.begin(), r.eos_ids.end(), 7), r.eos_ids.end());
  EXPECT_EQ(std::find(r.eos_ids.begin(), r.eos_ids.end(), 6), r.eos_ids.end());
}

// llama.cpp's converters write -1 (0xFFFFFFFF as uint32) for a special token
// the model lacks; such ids, and any id outside the vocabulary, mean "none".
TEST(Gguf, OutOfRangeSpecialIdsMeanNone) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen2);
  SyntheticWeights w = make_weights(c, true, 5);
  Vocab v = byte_level_vocab();
  GgufWriter g;
  add_config_metadata(g, c);
  add_vocab_metadata(g, v, "");
  g.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  g.set_i32("tokenizer.ggml.bos_token_id", -1);
  g.set_u32("tokenizer.ggml.unknown_token_id", 4000);  // past the 8 tokens
  for (const auto& [name, values] : w.values)
    g.add_tensor(name, DType::F32, w.shapes.at(name), values.data(), values.size() * 4);
  g.write(dir.file("m.gguf"));
  ModelFile m = open_model(dir.file("m.gguf"));
  EXPECT_EQ(m.vocab.pad_id, -1);
  EXPECT_EQ(m.vocab.bos_id, -1);
  EXPECT_EQ(m.vocab.unk_id, -1);
  EXPECT_EQ(m.vocab.eos_id, 5);
  // -1 is the convention and needs no note; 4000 is unusual and gets one.
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("tokenizer.ggml.unknown_token_id = 4000"), std::string::npos) << m.notes[0];
}

TEST(Gguf, MissingEosIsNotedWhenNothingEndsGeneration) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen2);
  SyntheticWeights w = make_weights(c, true, 5);
  Vocab v = byte_level_vocab();
  v.tokens = {"a", "b", "ab", "Ġ", "Ġab", "x", "y", "z"};  // no end-of-turn tokens
  v.types.assign(v.tokens.size(), TokenType::Normal);
  GgufWriter g;
  add_config_metadata(g, c);
  add_vocab_metadata(g, v, "");
  g.set_u32("tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
  for (const auto& [name, values] : w.values)
    g.add_tensor(name, DType::F32, w.shapes.at(name), values.data(), values.size() * 4);
  g.write(dir.file("m.gguf"));
  ModelFile m = open_model(dir.file("m.gguf"));
  EXPECT_EQ(m.vocab.eos_id, -1);
  EXPECT_TRUE(m.vocab.eos_ids.empty());
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("end-of-sequence"), std::string::npos) << m.notes[0];
}

// Files written by `gguf` (PyPI, the library llama.cpp's converters use),
// made by tools/oracles/gguf_files.py in the test stage "oracles"; skipped
// unless POCKET_ORACLE_GGUF names the folder. expected.json holds the config
// and each weight's first rows as gguf itself dequantizes them.
TEST(GgufLive, FilesWrittenByGgufPyLoadAsWritten) {
  const char* dir = std::getenv("POCKET_ORACLE_GGUF");
  if (!dir || !*dir) GTEST_SKIP() << "POCKET_ORACLE_GGUF not set (test.sh stage \"oracles\" writes the files)";
  const auto expected = nlohmann::json::parse(read_text_file(std::string(dir) + "/expected.json"));
  ASSERT_GE(expected["files"].size(), 4u);
  for (const auto& [name, e] : expected["files"].items()) {
    SCOPED_TRACE(name);
    const std::string path = std::string(dir) + "/" + name + ".gguf";
    ModelFile m = open_model(path);
    EXPECT_EQ(m.config.arch, Arch::Qwen3);
    EXPECT_EQ(m.config.dim, 64);
    EXPECT_EQ(m.config.n_layers, 2);
    EXPECT_EQ(m.config.n_kv_heads, 2);
    EXPECT_EQ(m.config.head_dim, 16);
    EXPECT_FLOAT_EQ(m.config.rope_theta, 1e6f);
    EXPECT_EQ(m.config.vocab_size, expected["vocab_size"].get<int>());
    // 0xFFFFFFFF ids mean "none": no error, and no note (it is the convention).
    EXPECT_EQ(m.vocab.bos_id, -1);
    EXPECT_EQ(m.vocab.pad_id, -1);
    EXPECT_EQ(m.vocab.eos_id, expected["eos"].get<int>());
    EXPECT_TRUE(m.notes.empty()) << m.notes[0];
    EXPECT_EQ(GgufFile::parse(MappedFile::open(path)).alignment(), e["alignment"].get<uint32_t>());
    for (const auto& [tname, t] : e["tensors"].items()) {
      const TensorView& w = m.get(tname);
      ASSERT_EQ(std::string(dtype_name(w.type)), t["type"].get<std::string>()) << tname;
      const auto rows = t["rows"].get<std::vector<std::vector<double>>>();
      std::vector<float> got(static_cast<size_t>(w.cols()));
      for (size_t r = 0; r < rows.size(); ++r) {
        if (w.shape.size() == 1) {
          std::memcpy(got.data(), w.data, got.size() * 4);
        } else {
          kernels::dequant_row(w, static_cast<int64_t>(r), got.data());
        }
        ASSERT_EQ(rows[r].size(), got.size()) << tname;
        for (size_t c = 0; c < got.size(); ++c)  // the same arithmetic: exact up to f32 rounding
          ASSERT_NEAR(got[c], rows[r][c], 1e-6 * std::max(1.0, std::fabs(rows[r][c]))) << tname << " [" << r << ", " << c << "]";
      }
    }
    // And it runs: a tokenizer from the file's metadata.
    auto tok = Tokenizer::create(m.vocab);
    EXPECT_FALSE(tok->encode("hello world").empty());
  }
  const std::string msg = error_of([&] { open_model(std::string(dir) + "/big_endian.gguf"); });
  EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
}

TEST(Gguf, SentencePieceVocabRoundTrip) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Llama);
  c.vocab_size = 512;
  SyntheticWeights w = make_weights(c, true, 9);
  Vocab v = vocab_from_llama2c(stories_tokenizer(), 512);
  write_gguf_model(dir.file("sp.gguf"), c, w, DType::F32, &v);
  ModelFile m = open_model(dir.file("sp.gguf"));
  const Vocab& r = m.vocab;
  EXPECT_EQ(r.kind, TokenizerKind::SentencePieceBPE);
  EXPECT_EQ(r.tokens, v.tokens);
  EXPECT_EQ(r.scores, v.scores);
  EXPECT_EQ(r.types, v.types);
  EXPECT_EQ(r.add_space_prefix, v.add_space_prefix);
  EXPECT_EQ(r.add_bos, v.add_bos);
  EXPECT_EQ(r.bos_id, v.bos_id);
  EXPECT_EQ(r.eos_id, v.eos_id);
}

TEST(Gguf, AllMetadataTypesParse) {
  TempDir dir;
  GgufWriter g(64);
  g.set("t.u8", GgufMeta::u8(200));
  g.set("t.i8", GgufMeta::i8(-100));
  g.set("t.u16", GgufMeta::u16(60000));
  g.set("t.i16", GgufMeta::i16(-30000));
  g.set("t.u32", GgufMeta::u32(4000000000u));
  g.set("t.i32", GgufMeta::i32(-2000000000));
  g.set("t.u64", GgufMeta::u64(1ull << 50));
  g.set("t.i64", GgufMeta::i64(-(1ll << 50)));
  g.set("t.f32", GgufMeta::f32(1.5f));
  g.set("t.f64", GgufMeta::f64(-2.25));
  g.set("t.bool", GgufMeta::boolean(true));
  g.set("t.str", GgufMeta::string("héllo"));
  g.set("t.empty", GgufMeta::array({}, GgufType::F32));
  g.set("t.nested", GgufMeta::array({GgufMeta::i32s({1, 2}), GgufMeta::i32s({3})}, GgufType::Array));
  g.set("t.strs", GgufMeta::strings({"x", "", "yz"}));
  std::vector<float> data(32, 0.5f);
  g.add_tensor("x", DType::F32, {32}, data.data(), 128);
  g.write(dir.file("t.gguf"));

  GgufFile f = GgufFile::parse(MappedFile::open(dir.file("t.gguf")));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(*f.get_int("t.u8"), 200);
  EXPECT_EQ(*f.get_int("t.i8"), -100);
  EXPECT_EQ(*f.get_int("t.u16"), 60000);
  EXPECT_EQ(*f.get_int("t.i16"), -30000);
  EXPECT_EQ(*f.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(*f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(*f.get_int("t.u64"), 1ll << 50);
  EXPECT_EQ(*f.get_int("t.i64"), -(1ll << 50));
  EXPECT_EQ(*f.get_float("t.f32"), 1.5);
  EXPECT_EQ(*f.get_float("t.f64"), -2.25);
  EXPECT_EQ(*f.get_bool("t.bool"), true);
  EXPECT_EQ(*f.get_string("t.str"), "héllo");
  EXPECT_TRUE(f.get_float_array("t.empty", true).empty());
  const GgufValue* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->arrays.size(), 2u);
  EXPECT_EQ(nested->arrays[0].count, 2u);
  EXPECT_EQ(nested->arrays[1].count, 1u);
  EXPECT_EQ(f.get_string_array("t.strs", true), (std::vector<std::string_view>{"x", "", "yz"}));
  EXPECT_FALSE(f.get_int("absent").has_value());
  EXPECT_NE(error_of([&] { f.get_int("t.str"); }).find("t.str"), std::string::npos);
  EXPECT_NE(error_of([&] { f.get_string_array("t.f32", true); }).find("t.f32"), std::string::npos);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor_data(f.tensors()[0])) % 64, 0u);
}

// A Pocket file: GGUF with pocket.version, PQ tensors and the compact tokenizer.
TEST(Gguf, PocketFileWithPqTensorsAndTokenizer) {
  TempDir dir;
  ModelConfig c = small_config(Arch::Qwen3);
  c.vocab_size = 512;
  c.hidden_dim = 80;  // not a multiple of the group: a padded tail group per row
  SyntheticWeights w = make_weights(c, true, 11);
  Vocab v = vocab_from_llama2c(stories_tokenizer(), 512);
  auto tok = Tokenizer::create(v);
  std::vector<uint8_t> blob = tok->serialize();

  const int group = 32;
  GgufWriter g;
  add_config_metadata(g, c);
  g.set_u32("pocket.version", kPocketFileVersion);
  g.set("pocket.tokenizer", GgufMeta::bytes(blob.data(), blob.size()));
  g.set_string("tokenizer.chat_template", "tmpl");
  std::map<std::string, std::vector<uint8_t>> stored;
  for (const auto& [name, values] : w.values) {
    const auto& shape = w.shapes.at(name);
    if (shape.size() == 1) {
      g.add_tensor(name, DType::F32, shape, values.data(), values.size() * 4);
      continue;
    }
    // Opaque PQ bytes of the size pq_format.h defines: rows padded to 16.
    DType t = name.find("ffn") != std::string::npos ? DType::PQ8 : DType::PQ4;
    int64_t rows = (shape[0] + 15) / 16 * 16, groups = (shape[1] + group - 1) / group;
    int64_t per_group = t == DType::PQ4 ? group / 2 + 4 : group + 2;
    auto& b = stored[name];
    b.resize(static_cast<size_t>(rows * groups * per_group));
    Rng rng(b.size());
    for (auto& x : b) x = static_cast<uint8_t>(rng.next());
    g.add_tensor(name, t, shape, b.data(), b.size(), group);
  }
  g.write(dir.file("m.pocket"));

  ModelFile m = open_model(dir.file("m.pocket"));
  EXPECT_EQ(m.format, "pocket");
  EXPECT_EQ(m.config.arch, Arch::Qwen3);
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.chat_template, "tmpl");
  ASSERT_TRUE(m.has_vocab);
  EXPECT_EQ(m.vocab.tokens, v.tokens);
  for (const auto& [name, b] : stored) {
    SCOPED_TRACE(name);
    const TensorView& t = m.get(name);
    EXPECT_EQ(t.type, name.find("ffn") != std::string::npos ? DType::PQ8 : DType::PQ4);
    EXPECT_EQ(t.group, group);
    ASSERT_EQ(t.nbytes, b.size());
    EXPECT_EQ(std::memcmp(t.data, b.data(), b.size()), 0);
  }
  EXPECT_EQ(m.get("output_norm.weight").group, 0);
}

// --- Hostile and invalid files -------------------------------------------------

// Little-endian byte builder for hand-made GGUF files.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put<uint32_t>(3).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  // A tensor info: name, dims (fastest first, as stored), type, offset.
  Bytes& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (auto d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Bytes& pad_to(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
};

std::string open_error(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  write_file(dir.file("bad.gguf"), bytes);
  return error_of([&] { GgufFile::parse(MappedFile::open(dir.file("bad.gguf"))); });
}

TEST(GgufHostile, AbsurdCounts) {
  TempDir dir;
  EXPECT_NE(open_error(dir, Bytes().header(1ull << 60, 0).b).find("tensor count"), std::string::npos);
  EXPECT_NE(open_error(dir, Bytes().header(0, ~0ull).b).find("metadata count"), std::string::npos);
}

TEST(GgufHostile, HugeStringAndArrayLengthsDoNotAllocate) {
  TempDir dir;
  // A ~60-byte file declaring a 2^62-byte string, 2^60 strings, 2^61 u64s, 2^59 nested arrays.
  auto msg = open_error(dir, Bytes().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1ull << 62).b);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  msg = open_error(dir, Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1ull << 60).b);
  EXPECT_NE(msg.find("'k'"), std::string::npos) << msg;
  msg = open_error(dir, Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1ull << 61).b);
  EXPECT_NE(msg.find("overflows"), std::string::npos) << msg;
  msg = open_error(dir, Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1ull << 59).b);
  EXPECT_NE(msg.find("nested"), std::string::npos) << msg;
  msg = open_error(dir, Bytes().header(0, 1).put<uint64_t>(~0ull).put<uint64_t>(0).put<uint64_t>(0).b);
  EXPECT_NE(msg.find("key"), std::string::npos) << msg;
  // Arrays nested deeper than the parser allows.
  Bytes deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 100; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(4).put<uint64_t>(0);
  msg = open_error(dir, deep.b);
  EXPECT_NE(msg.find("deeper"), std::string::npos) << msg;
}

// general.alignment below 8 (the GGUF spec asks for a multiple of 8) would
// let an F16/F32 tensor start at an odd address: a misaligned typed read
// (fuzz_gguf_struct, UBSan). Such files are refused by name.
TEST(GgufHostile, AlignmentBelowEightIsRefused) {
  TempDir dir;
  for (uint32_t align : {0u, 1u, 2u, 4u, 12u}) {
    SCOPED_TRACE(align);
    const auto msg = open_error(dir, Bytes().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(align).b);
    EXPECT_NE(msg.find("general.alignment = " + std::to_string(align)), std::string::npos) << msg;
  }
  EXPECT_THROW(GgufWriter w(4), Error);
}

TEST(GgufHostile, BadTensorInfos) {
  TempDir dir;
  auto one = [&](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    Bytes b;
    b.header(1, 0).tensor("w", std::move(ne), type, offset).pad_to(32);
    b.b.resize(b.b.size() + data_bytes, 0);
    return open_error(dir, b.b);
  };
  std::string msg = one({1ull << 32, 1ull << 32, 1ull << 32}, 0, 0, 64);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
  msg = one({16, 0}, 0, 0, 64);
  EXPECT_NE(msg.find("dimension"), std::string::npos) << msg;
  msg = one({16}, 0, 64, 64);
  EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
  msg = one({16}, 0, ~0ull - 31, 64);  // offset + size wraps around
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  msg = one({16}, 0, 4, 128);
  EXPECT_NE(msg.find("alignment"), std::string::npos) << msg;
  msg = one({256}, 16, 0, 256);  // IQ2_XXS: not supported
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("type id 16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Q6_K"), std::string::npos) << msg;  // the message lists what is supported
  msg = one({33}, 8, 0, 256);  // Q8_0 row not a multiple of 32
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  msg = one({16, 1, 1, 1, 1}, 0, 0, 64);
  EXPECT_NE(msg.find("n_dims"), std::string::npos) << msg;
  msg = one({16}, 1024, 0, 64);  // PQ4 without a group size
  EXPECT_NE(msg.find("group_size"), std::string::npos) << msg;
}

// llama.cpp's block types (Q4_1, Q5_0, Q5_1, K-quants) get the same checks
// as the others: whole blocks per row, sizes against the file, overflow.
TEST(GgufHostile, BadBlockTypeTensors) {
  TempDir dir;
  auto one = [&](std::vector<uint64_t> ne, uint32_t type, size_t data_bytes) {
    Bytes b;
    b.header(1, 0).tensor("blk.0.ffn_down.weight", std::move(ne), type, 0).pad_to(32);
    b.b.resize(b.b.size() + data_bytes, 0);
    write_file(dir.file("k.gguf"), b.b);
    return error_of([&] { GgufFile::parse(MappedFile::open(dir.file("k.gguf"))); });
  };
  struct T {
    uint32_t id;
    uint64_t block;
    uint64_t bytes;
  };
  for (T t : {T{3, 32, 20}, T{6, 32, 22}, T{7, 32, 24}, T{10, 256, 84}, T{11, 256, 110}, T{12, 256, 144},
              T{13, 256, 176}, T{14, 256, 210}, T{15, 256, 292}}) {
    SCOPED_TRACE(t.id);
    // Exactly the right size opens; one byte short is past the end.
    Bytes ok;
    ok.header(1, 0).tensor("w", {t.block * 2, 3}, t.id, 0).pad_to(32);
    ok.b.resize(ok.b.size() + 6 * t.bytes, 0);
    write_file(dir.file("ok.gguf"), ok.b);
    GgufFile g = GgufFile::parse(MappedFile::open(dir.file("ok.gguf")));
    ASSERT_EQ(g.tensors().size(), 1u);
    EXPECT_EQ(g.tensors()[0].nbytes, 6 * t.bytes);
    EXPECT_EQ(gguf_type_id(g.tensors()[0].type), t.id);
    std::string msg = one({t.block * 2, 3}, t.id, 6 * t.bytes - 1);
    EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
    // A row that is not a whole number of blocks.
    msg = one({t.block + 16, 2}, t.id, 4096);
    EXPECT_NE(msg.find("blk.0.ffn_down.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block size " + std::to_string(t.block)), std::string::npos) << msg;
    // Sizes whose product overflows 64 bits, and one that fits 64 bits but not the file.
    msg = one({t.block << 30, 1ull << 40}, t.id, 64);
    EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
    msg = one({t.block << 20, 1ull << 20}, t.id, 64);
    EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
  }
}

TEST(GgufHostile, BadVersionAndMagic) {
  TempDir dir;
  Bytes b;
  b.header(0, 0);
  b.b[4] = 1;
  EXPECT_NE(open_error(dir, b.b).find("version 1"), std::string::npos);
  b.b[4] = 2;  // version 2 has the same layout as 3
  write_file(dir.file("v2.gguf"), b.b);
  EXPECT_EQ(GgufFile::parse(MappedFile::open(dir.file("v2.gguf"))).version(), 2u);
  // gguf-py writes big-endian files on request: the version reads byte-swapped.
  b.b[4] = 0;
  b.b[7] = 3;
  const std::string msg = open_error(dir, b.b);
  EXPECT_NE(msg.find("big-endian GGUF file (version 3"), std::string::npos) << msg;
}

// Model-level errors: each names the file and the problem.
class GgufModelErrors : public ::testing::Test {
 protected:
  std::string open_with(const std::function<void(GgufWriter&, SyntheticWeights&, ModelConfig&)>& edit) {
    ModelConfig c = small_config(Arch::Qwen2);
    SyntheticWeights w = make_weights(c, true, 1);
    GgufWriter g;
    add_config_metadata(g, c);
    edit(g, w, c);  // set() replaces keys written above
    for (const auto& [name, values] : w.values)
      g.add_tensor(name, DType::F32, w.shapes.at(name), values.data(), values.size() * 4);
    g.write(dir.file("e.gguf"));
    return error_of([&] { open_model(dir.file("e.gguf")); });
  }
  TempDir dir;
};

TEST_F(GgufModelErrors, UnknownArchitecture) {
  auto msg = open_with([](GgufWriter& g, SyntheticWeights&, ModelConfig&) { g.set_string("general.architecture", "gptj"); });
  EXPECT_NE(msg.find("gptj"), std::string::npos) << msg;
  EXPECT_NE(msg.find("e.gguf"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, KvHeadsMustDivideHeads) {
  auto msg = open_with([](GgufWriter& g, SyntheticWeights&, ModelConfig&) {
    g.set_u32("qwen2.attention.head_count_kv", 3);
  });
  EXPECT_NE(msg.find("n_kv_heads"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, MissingTokenizer) {
  auto msg = open_with([](GgufWriter&, SyntheticWeights&, ModelConfig&) {});
  EXPECT_NE(msg.find("tokenizer"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, UnknownTokenizerModel) {
  auto msg = open_with([](GgufWriter& g, SyntheticWeights&, ModelConfig&) {
    add_vocab_metadata(g, byte_level_vocab(), "");
    g.set_string("tokenizer.ggml.model", "bert");
  });
  EXPECT_NE(msg.find("bert"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, WrongShapeNamesTensorAndShapes) {
  auto msg = open_with([](GgufWriter&, SyntheticWeights& w, ModelConfig&) {
    w.shapes["blk.1.ffn_up.weight"] = {64, 96};  // transposed
  });
  EXPECT_NE(msg.find("blk.1.ffn_up.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{64, 96}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{96, 64}"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, MissingTensor) {
  auto msg = open_with([](GgufWriter&, SyntheticWeights& w, ModelConfig&) { w.values.erase("blk.0.attn_k.bias"); });
  EXPECT_NE(msg.find("blk.0.attn_k.bias"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, FloatOutOfRange) {
  auto msg = open_with([](GgufWriter& g, SyntheticWeights&, ModelConfig&) {
    g.set("qwen2.rope.freq_base", GgufMeta::f64(1e300));
  });
  EXPECT_NE(msg.find("qwen2.rope.freq_base"), std::string::npos) << msg;
}

TEST_F(GgufModelErrors, ZeroHeads) {
  auto msg = open_with([](GgufWriter& g, SyntheticWeights&, ModelConfig&) {
    g.set_u32("qwen2.attention.head_count", 0);
  });
  EXPECT_NE(msg.find("n_heads"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pocket::test
