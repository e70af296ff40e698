// pocket_fuzz_seeds OUT_DIR: writes the seed corpora of the fuzz targets
// (fuzz/corpus/<target>/) from tiny synthetic models, so the seeds stay a few
// KB each and can be regenerated: plain GGUF (Q4_0 / Q8_0 / F16 / F32 tensors,
// tokenizer.ggml.* for byte-level and SentencePiece vocabularies), Pocket
// files (PQ4/PQ8 + pocket.tokenizer), safetensors and Hugging Face folders
// (single file and sharded index), llama2.c checkpoints (legacy and v1) with
// a small tokenizer.bin, binary tokenizers, chat templates and texts.
// DFlash draft vocabulary rankings and Pocket draft files come from the
// small draft of dflash_setup.h.
// Multi-file seeds are joined with fuzz_util.h's separator line.
// Run by scripts/fuzz.sh --seeds (the committed corpora were made with it).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "convert/create_model.h"
#include "convert/pocket_file.h"
#include "formats/gguf_writer.h"
#include "formats/hf_folder.h"
#include "formats/llama2c.h"
#include "formats/safetensors.h"
#include "dflash_setup.h"
#include "fuzz_util.h"
#include "heads/head_file.h"
#include "state/session_state.h"
#include "state_model.h"
#include "util/thread_pool.h"
#include "quant/quantize.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace {

using namespace pocket;
using json = nlohmann::json;

std::string out_dir;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read ", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  const std::string dir = out_dir + "/" + target;
  std::string cmd = "mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) fail("cannot create ", dir);
  fuzz::write_file(dir + "/" + name, bytes);
  std::printf("%-14s %-28s %7zu bytes\n", target.c_str(), name.c_str(), bytes.size());
}

std::string mapped(std::string_view raw) {  // raw bytes -> byte-level piece
  std::string s;
  for (unsigned char b : raw) unicode::append_utf8(s, byte_level::kByteToCp[b]);
  return s;
}

// 256 byte symbols, 13 merges (English and one CJK character), 3 specials.
Vocab seed_vocab() {
  Vocab v = convert::synthetic_vocab(259);
  const char* merges[][2] = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"},  {" ", "a"},
                             {"e", "r"}, {"o", "n"},  {" ", "t"},   {"a", "n"}, {"an", "d"},
                             {" ", "and"}, {"\xe4", "\xbd"}, {"\xe4\xbd", "\xa0"}};
  std::vector<std::string> tokens(v.tokens.begin(), v.tokens.begin() + 256);
  std::vector<TokenType> types(256, TokenType::Normal);
  for (auto& m : merges) {
    v.merges.emplace_back(mapped(m[0]), mapped(m[1]));
    tokens.push_back(mapped(std::string(m[0]) + m[1]));
    types.push_back(TokenType::Normal);
  }
  for (size_t i = 256; i < v.tokens.size(); ++i) {
    tokens.push_back(v.tokens[i]);
    types.push_back(v.types[i]);
  }
  const int32_t first_special = static_cast<int32_t>(tokens.size()) - 3;
  v.tokens = tokens;
  v.types = types;
  v.pad_id = first_special;
  v.eos_id = first_special + 2;
  v.eos_ids = {v.eos_id, v.pad_id};
  return v;
}

// llama2.c tok512.bin cut to its first n entries (<unk>, <s>, </s>, bytes, pieces).
std::string tok512_prefix(int n) {
  const std::string full = read_all(fuzz::shared_dir() + "/models/tok512.bin");
  size_t at = 4;
  for (int i = 0; i < n; ++i) {
    int32_t len;
    std::memcpy(&len, full.data() + at + 4, 4);
    at += 8 + static_cast<size_t>(len);
  }
  return full.substr(0, at);
}

ModelConfig tiny_config(Arch arch, int vocab) {
  ModelConfig c;
  c.arch = arch;
  c.dim = 32;
  c.hidden_dim = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.vocab_size = vocab;
  c.max_seq_len = 64;
  c.rope_theta = arch == Arch::Llama ? 10000.0f : 1000000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = arch == Arch::Llama ? RopeStyle::Adjacent : RopeStyle::Halves;
  c.qkv_bias = arch == Arch::Qwen2;
  c.qk_norm = arch == Arch::Qwen3;
  c.tied_embeddings = true;
  return c;
}

struct Weights {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;  // canonical names
  std::map<std::string, std::vector<float>> f32;
};

Weights make_weights(const ModelConfig& c, bool tied, uint32_t seed) {
  Weights w;
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  w.shapes.push_back({"token_embd.weight", {c.vocab_size, d}});
  w.shapes.push_back({"output_norm.weight", {d}});
  if (!tied) w.shapes.push_back({"output.weight", {c.vocab_size, d}});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.shapes.push_back({b + "attn_norm.weight", {d}});
    w.shapes.push_back({b + "attn_q.weight", {q, d}});
    w.shapes.push_back({b + "attn_k.weight", {kv, d}});
    w.shapes.push_back({b + "attn_v.weight", {kv, d}});
    w.shapes.push_back({b + "attn_output.weight", {d, q}});
    if (c.qkv_bias)
      for (auto [n, len] : {std::pair<const char*, int64_t>{"attn_q.bias", q}, {"attn_k.bias", kv}, {"attn_v.bias", kv}})
        w.shapes.push_back({b + n, {len}});
    if (c.qk_norm) {
      w.shapes.push_back({b + "attn_q_norm.weight", {c.head_dim}});
      w.shapes.push_back({b + "attn_k_norm.weight", {c.head_dim}});
    }
    w.shapes.push_back({b + "ffn_norm.weight", {d}});
    w.shapes.push_back({b + "ffn_gate.weight", {h, d}});
    w.shapes.push_back({b + "ffn_up.weight", {h, d}});
    w.shapes.push_back({b + "ffn_down.weight", {d, h}});
  }
  uint32_t s = seed * 2654435761u + 1;
  for (const auto& [name, shape] : w.shapes) {
    int64_t n = 1;
    for (auto x : shape) n *= x;
    auto& v = w.f32[name];
    v.resize(static_cast<size_t>(n));
    for (auto& x : v) {
      s = s * 1664525u + 1013904223u;
      x = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 0.5f;
    }
  }
  return w;
}

const std::string kLlama3Template =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' "
    "+ message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// Gemma's shape: the system message folded into the first user turn,
// "model" for the assistant's turns.
const std::string kGemmaTemplate =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\\n\\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set first = '' %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\\n' "
    "+ (first if loop.first else '') + m['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

// A GGUF (or Pocket, when `pocket_group` > 0) model file.
std::string gguf_model(const ModelConfig& c, const Vocab& v, const std::string& tmpl, DType matrix_type,
                       int pocket_group, uint32_t seed) {
  Weights w = make_weights(c, c.tied_embeddings, seed);
  GgufWriter g = pocket_group ? convert::pocket_writer(c, v, tmpl, pocket_group) : GgufWriter(32);
  if (!pocket_group) {
    add_config_metadata(g, c);
    add_vocab_metadata(g, v, tmpl);
  }
  std::vector<std::vector<uint8_t>> keep;
  for (const auto& [name, shape] : w.shapes) {
    const bool one_d = shape.size() == 1;
    const DType t = one_d || convert::keep_f32(name, shape) ? DType::F32 : matrix_type;
    const int64_t rows = one_d ? 1 : shape[0], cols = shape.back();
    keep.push_back(quantize(w.f32[name].data(), rows, cols, t, pocket_group ? pocket_group : 32));
    g.add_tensor(name, t, shape, keep.back().data(), keep.back().size(), t == DType::PQ4 || t == DType::PQ8 ? pocket_group : 0);
  }
  const std::string path = fuzz::scratch_path("seeds", "m.gguf");
  g.write(path);
  return read_all(path);
}

std::string hf_name(const std::string& canon) { return hf_tensor_name(canon); }

// safetensors bytes of the tensors whose index is in [first, last) (all by default).
std::string safetensors(const Weights& w, DType t, size_t first, size_t last,
                        const std::map<std::string, std::string>& meta = {}) {
  std::vector<std::vector<uint8_t>> keep;
  std::vector<TensorView> views;
  for (size_t i = first; i < std::min(last, w.shapes.size()); ++i) {
    const auto& [name, shape] = w.shapes[i];
    const int64_t rows = shape.size() == 1 ? 1 : shape[0];
    keep.push_back(quantize(w.f32.at(name).data(), rows, shape.back(), t, 0));
    TensorView v;
    v.name = hf_name(name);
    v.type = t;
    v.shape = shape;
    v.data = keep.back().data();
    v.nbytes = keep.back().size();
    views.push_back(v);
  }
  const std::string path = fuzz::scratch_path("seeds", "m.safetensors");
  write_safetensors(path, views, meta);
  return read_all(path);
}

json hf_config(const ModelConfig& c, const char* arch, const char* type) {
  json j = {{"architectures", {arch}}, {"model_type", type}, {"hidden_size", c.dim},
            {"intermediate_size", c.hidden_dim}, {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
            {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.max_seq_len},
            {"rms_norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta},
            {"tie_word_embeddings", c.tied_embeddings}, {"torch_dtype", "bfloat16"}};
  if (c.arch == Arch::Qwen3) j["head_dim"] = c.head_dim;
  return j;
}

// A tokenizer.json in the Qwen3 file's structure, with the seed vocabulary.
std::string small_tokenizer_json(const Vocab& v) {
  json q = json::parse(read_all(fuzz::shared_dir() + "/tokenizers/qwen3/tokenizer.json"));
  json vocab = json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] != TokenType::Control) vocab[v.tokens[i]] = i;
  json merges = json::array();
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.types[i] == TokenType::Control)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
  q["added_tokens"] = added;
  q["model"]["vocab"] = vocab;
  q["model"]["merges"] = merges;
  return q.dump(1);
}

std::string small_tokenizer_config(const std::string& tmpl, const char* eos = "<|im_end|>",
                                   const char* pad = "<|endoftext|>", bool add_bos = false) {
  json c = {{"add_bos_token", add_bos}, {"add_prefix_space", false}, {"bos_token", nullptr},
            {"eos_token", eos}, {"pad_token", pad}, {"chat_template", tmpl},
            {"model_max_length", 64}, {"tokenizer_class", "Qwen2Tokenizer"}};
  if (add_bos) c["bos_token"] = "<|begin_of_text|>";
  return c.dump(1);
}

void write_seeds() {
  const Vocab v = seed_vocab();
  const int nv = static_cast<int>(v.tokens.size());
  const std::string chatml = convert::chatml_template();
  const json qcfg = json::parse(read_all(fuzz::shared_dir() + "/tokenizers/qwen3/tokenizer_config.json"));
  const std::string qwen3_template = qcfg.at("chat_template").get<std::string>();

  // --- gguf: plain GGUF and Pocket files ---------------------------------
  put("gguf", "llama-q4_0.gguf", gguf_model(tiny_config(Arch::Llama, nv), v, "", DType::Q4_0, 0, 1));
  ModelConfig q2 = tiny_config(Arch::Qwen2, nv);
  q2.tied_embeddings = false;
  put("gguf", "qwen2-q8_0-untied.gguf", gguf_model(q2, v, chatml, DType::Q8_0, 0, 2));
  put("gguf", "qwen3-f16.gguf", gguf_model(tiny_config(Arch::Qwen3, nv), v, qwen3_template, DType::F16, 0, 3));
  const Vocab sp = vocab_from_llama2c_bytes(reinterpret_cast<const uint8_t*>(tok512_prefix(280).data()),
                                            tok512_prefix(280).size(), 280, "tok512 prefix");
  put("gguf", "llama-sp-q4_0.gguf", gguf_model(tiny_config(Arch::Llama, 280), sp, "", DType::Q4_0, 0, 4));
  put("gguf", "qwen3-pq4.pocket", gguf_model(tiny_config(Arch::Qwen3, nv), v, chatml, DType::PQ4, 32, 5));
  put("gguf", "qwen2-pq8.pocket", gguf_model(tiny_config(Arch::Qwen2, nv), v, kLlama3Template, DType::PQ8, 32, 6));

  // --- safetensors: single file, config fixed by the target (Llama, vocab 272) ---
  {
    const Weights w = make_weights(tiny_config(Arch::Llama, nv), true, 7);
    put("safetensors", "llama-bf16.safetensors", safetensors(w, DType::BF16, 0, SIZE_MAX, {{"format", "pt"}}));
    put("safetensors", "llama-f16.safetensors", safetensors(w, DType::F16, 0, SIZE_MAX));
  }

  // --- hf_folder: config | index | shard 1 | shard 2 | tokenizer.json | tokenizer_config.json ---
  const std::string tj = small_tokenizer_json(v);
  {
    const ModelConfig c = tiny_config(Arch::Qwen3, nv);
    const Weights w = make_weights(c, true, 8);
    put("hf_folder", "qwen3-single",
        fuzz::join_parts({hf_config(c, "Qwen3ForCausalLM", "qwen3").dump(1), "", safetensors(w, DType::BF16, 0, SIZE_MAX), "",
                          tj, small_tokenizer_config(qwen3_template)}));
    ModelConfig c2 = tiny_config(Arch::Qwen2, nv);
    c2.tied_embeddings = false;
    const Weights w2 = make_weights(c2, false, 9);
    const size_t half = w2.shapes.size() / 2;
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    for (size_t i = 0; i < w2.shapes.size(); ++i)
      index["weight_map"][hf_name(w2.shapes[i].first)] =
          i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    put("hf_folder", "qwen2-sharded",
        fuzz::join_parts({hf_config(c2, "Qwen2ForCausalLM", "qwen2").dump(1), index.dump(1),
                          safetensors(w2, DType::F16, 0, half), safetensors(w2, DType::F16, half, SIZE_MAX), tj,
                          small_tokenizer_config(chatml)}));
  }

  // --- hf_tokenizer: tokenizer.json | tokenizer_config.json ---
  put("hf_tokenizer", "qwen-style-small", fuzz::join_parts({tj, small_tokenizer_config(qwen3_template)}));
  put("hf_tokenizer", "gpt2-small", read_all(std::string(POCKET_SOURCE_DIR) + "/tests/data/tokenizer/gpt2_small/tokenizer.json"));
  put("hf_tokenizer", "llama3-small",
      fuzz::join_parts({read_all(std::string(POCKET_SOURCE_DIR) + "/tests/data/tokenizer/llama3_small/tokenizer.json"),
                        small_tokenizer_config(kLlama3Template, "<|eot_id|>", "<|eot_id|>", true)}));

  // --- llama2c: checkpoint | tokenizer.bin ---
  {
    ModelConfig c = tiny_config(Arch::Llama, 280);
    c.dim = 16;
    c.head_dim = 8;
    c.n_kv_heads = 2;
    c.max_seq_len = 32;
    const std::string tok = tok512_prefix(280);
    for (auto [version, tied, name] : {std::tuple{Llama2cVersion::Legacy, true, "legacy-shared"},
                                       std::tuple{Llama2cVersion::V1, false, "v1-separate"}}) {
      c.tied_embeddings = tied;
      const Weights w = make_weights(c, tied, 10);
      std::map<std::string, TensorView> views;
      for (const auto& [n, shape] : w.shapes) {
        TensorView t;
        t.name = n;
        t.shape = shape;
        t.data = w.f32.at(n).data();
        t.nbytes = w.f32.at(n).size() * 4;
        views[n] = t;
      }
      const std::string path = fuzz::scratch_path("seeds", "m.bin");
      write_llama2c(path, c, views, version);
      put("llama2c", name, fuzz::join_parts({read_all(path), tok}));
    }
  }

  // --- tokenizer_bin: Pocket's binary tokenizer form ---
  auto blob = [](const Vocab& x) {
    std::vector<uint8_t> b = Tokenizer::create(x)->serialize();
    return std::string(b.begin(), b.end());
  };
  put("tokenizer_bin", "byte-level-merges.pktk", blob(v));
  put("tokenizer_bin", "sentencepiece-280.pktk", blob(sp));
  put("tokenizer_bin", "synthetic-300.pktk", blob(convert::synthetic_vocab(300)));

  // --- chat: flags+template | role\ncontent ... ---
  const std::vector<std::string> convo = {"system\nYou are a helpful assistant.", "user\nHello! 你好 <|im_start|>",
                                          "assistant\n<think>\nhm\n</think>\n\nHi there.", "user\nAnd now?"};
  auto chat_seed = [&](char flags, const std::string& tmpl) {
    std::vector<std::string> parts = {std::string(1, flags) + tmpl};
    parts.insert(parts.end(), convo.begin(), convo.end());
    return fuzz::join_parts(parts);
  };
  put("chat", "qwen3", chat_seed('\x03', qwen3_template));
  put("chat", "qwen3-no-think", chat_seed('\x01', qwen3_template));
  put("chat", "chatml", chat_seed('\x01', chatml));
  put("chat", "llama3", chat_seed('\x01', kLlama3Template));
  put("chat", "gemma", chat_seed('\x01', kGemmaTemplate));
  put("chat", "raw", chat_seed('\x00', ""));
  put("chat", "unknown", chat_seed('\x02', "{% for m in messages %}{{ m.content }}{% endfor %}"));

  // --- tokenize / tokenize_diff: texts (tokenize: byte 0 = options) ---
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"english", "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."},
      {"chinese", "你好，世界！今天天气很好，我们去公园散步吧。酒店房间服务早餐"},
      {"mixed", "Qwen3 是一个 language model; it's 0.6B params (2025), can't stop!!\n\n  def f(x):\n\treturn x**2\r\n"},
      {"specials", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<|endoftext|>"},
      {"invalid-utf8", "ab\xff\xfe\xc3\x28 \xe2\x82 \xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf end"},
      {"nfc", "e\xcc\x81 A\xcc\x8a \xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xef\xac\x80 \xe2\x84\xab q\xcc\xa3\xcc\x87 \xe0\xa4\x95\xe0\xa4\xbc"},
      {"long-word", std::string(100, 'a') + " " + "的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要她出也得里后自以会家可下而过"},
      {"numbers-space", "1234567890 3.14159   \t\t  \n\n\n   x  y   ‍ 🙂🙂  'S 'll 'VE"},
  };
  for (const auto& [name, text] : texts) {
    put("tokenize", name, (name == "specials" ? std::string("\x01") : std::string("\x00", 1)) + text);
    put("tokenize_diff", name, text);
  }

  // --- constrain: byte 0 the kind (0 JSON Schema, 1 GBNF, 2 regex, 3
  // choices, 4 any JSON), byte 1 the walk seed, then the text: a sample of
  // the schema corpus, the GBNF suites, regexes and hostile shapes ---
  const std::string cdir = std::string(POCKET_SOURCE_DIR) + "/tests/data/constrain/";
  for (const char* s : {"form_00", "formats_03", "intent_13", "misc_15", "product_03", "recursive_09"})
    put("constrain", s, std::string("\x00\x07", 2) + read_all(cdir + "schemas/" + s + ".json"));
  for (const char* g : {"arithmetic", "chinese", "json", "list"})
    put("constrain", g, std::string("\x01\x03", 2) + read_all(cdir + "gbnf/" + g + ".gbnf"));
  put("constrain", "regex", std::string("\x02\x05", 2) + "(Yes|No), because [a-z ]{1,20}\\.\\d{2,4}[^\"\\\\]*");
  put("constrain", "choices", std::string("\x03\x01", 2) + "cat\ndog\n\xe4\xbd\xa0\xe5\xa5\xbd\nbird");
  put("constrain", "any-json-ws", std::string("\x09\x02", 2));
  put("constrain", "deep-nesting", std::string("\x00\x00", 2) + [] {
    std::string s;
    for (int i = 0; i < 200; ++i) s += "{\"type\":\"array\",\"items\":";
    s += "{\"type\":\"integer\"}";
    return s + std::string(200, '}');
  }());
  put("constrain", "huge-repeat", std::string("\x02\x00", 2) + "(a{1,65535}){1,65535}");
  put("constrain", "left-recursive", std::string("\x01\x00", 2) + "root ::= root \"a\" | \"b\"\n");

  // --- kernels_diff: one seed per weight type (byte 0, the index into its
  // type list), a tile-and-a-bit of rows, several blocks, 5 tokens, then
  // option bytes and a pattern of codes/activations ---
  for (int type = 0; type < 13; ++type) {
    std::string seed = {static_cast<char>(type), 17, 7, 1, 4, static_cast<char>(type * 3), static_cast<char>(type)};
    for (int i = 0; i < 512; ++i) seed += static_cast<char>((i * 73 + type * 29) & 0xff);
    put("kernels_diff", "type" + std::to_string(type), seed);
  }

  // --- head_file: a linear head and an MLP head with a prompt template,
  // written by save_head as `pocket train-head` does ---
  for (int hidden : {0, 5}) {
    heads::Head h;
    h.name = hidden ? "intent" : "default";
    h.base_hash = "0123456789abcdef";
    h.labels = {"yes", "no", "\xe5\x85\xb6\xe4\xbb\x96"};
    if (hidden) h.features.prompt_template = "Q: {text}\nA:";
    h.net.init(8, hidden, 3, 7 + hidden);
    h.mean.assign(8, 0.25f);
    h.inv_std.assign(8, 2.0f);
    h.temperature = 1.5f;
    h.threshold = 0.3f;
    const std::string tmp = fuzz::scratch_path("seeds", "seed.head");
    heads::save_head(h, tmp);
    put("head_file", hidden ? "mlp.head" : "linear.head", read_all(tmp));
  }

  // --- server_request: request bodies (first byte: bit 0 completions,
  // bit 1 thinking, bits 2-3 chat family) ---
  put("server_request", "chat", std::string("\x00") + R"({"model":"pocket","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <|im_start|> \u4f60\u597d"}],"max_tokens":16,"temperature":0.7,"top_p":0.9,"stop":["\n"],"seed":3})");
  put("server_request", "chat-stream-parts", std::string("\x06") + R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"c"}],"stream":true,"stream_options":{"include_usage":true},"response_format":{"type":"text"}})");
  put("server_request", "completion", std::string("\x01") + R"({"model":"m","prompt":"Once upon a time","max_tokens":8,"temperature":0,"stop":"the","ignore_eos":true,"n":1})");
  put("server_request", "bad-types", std::string("\x0c") + R"({"messages":[{"role":"tool","content":null}],"max_tokens":-1,"temperature":"hot","top_k":1e99})");

  // --- ops_diff: one seed per op (byte 0), 321 elements, values up to 2^12,
  // then a pattern of value bytes ---
  for (int op = 0; op < 7; ++op) {
    std::string seed = {static_cast<char>(op), 0x41, 0x01, 12};
    for (int i = 0; i < 600; ++i) seed += static_cast<char>((i * 89 + op * 53 + (i >> 3)) & 0xff);
    put("ops_diff", "op" + std::to_string(op), seed);
  }

  // --- session_state: states of the fuzz target's model, empty, a short
  // chat (cached tokens + conversation) and a nearly full context ---
  {
    auto model = fuzz::state_fuzz_model();
    ThreadPool pool(1);
    const std::string tmp = fuzz::scratch_path("seeds", "seed.state");
    for (int n : {0, 9, fuzz::kStateFuzzContext - 2}) {
      Context ctx(model->config(), fuzz::kStateFuzzContext);
      std::vector<int32_t> tokens(n);
      for (int i = 0; i < n; ++i) tokens[i] = (i * 37 + 5) % model->config().vocab_size;
      std::vector<float> logits(model->config().vocab_size);
      if (n > 0) model->forward(tokens, ctx, pool, logits.data());
      std::vector<int32_t> conversation = tokens;
      if (n == 9) conversation.insert(conversation.end(), {3, 4});
      save_session_state(tmp, *model, ctx.cache, {tokens, conversation});
      put("session_state", "tokens" + std::to_string(n) + ".state", read_all(tmp));
    }
  }

  // --- draft_vocab: option byte (bits 0-2 the --draft-vocab size, bit 7
  // convert-draft, bit 6 PQ8) + a ranking of the tiny target's 300 tokens;
  // draft_file: Pocket draft files of the small draft by convert-draft ---
  {
    const int vocab = 300;
    auto ranking = [&](int n, const char* eol) {
      std::string t = "pocket-draft-vocab 1 " + std::to_string(vocab) + eol;
      for (int i = 0; i < n; ++i) t += std::to_string((i * 7 + 3) % vocab) + eol;
      return t;
    };
    put("draft_vocab", "all-300", std::string("\x00", 1) + ranking(vocab, "\n"));
    put("draft_vocab", "top-40-convert", std::string("\x84") + ranking(40, "\n"));
    put("draft_vocab", "top-8-crlf-pq8", std::string("\xc2") + ranking(8, "\r\n"));
    put("draft_vocab", "one-too-few", std::string("\x05") + ranking(1, "\n"));
    const std::string dir = fuzz::scratch_path("seeds-dflash", "");
    fuzz::small_dflash_draft().write(dir, 64);
    const std::string tmp = fuzz::scratch_path("seeds", "draft.pocket");
    struct FileSeed {
      const char* name;
      DType type;
      int ranked;
    };
    for (const FileSeed& f : {FileSeed{"pq4-ranked-300.pocket", DType::PQ4, vocab}, FileSeed{"pq8-ranked-40.pocket", DType::PQ8, 40},
                              FileSeed{"f16-unranked.pocket", DType::F16, 0}}) {
      fuzz::remove_file(dir + "/" + kDraftVocabFileName);
      if (f.ranked) fuzz::write_file(dir + "/" + kDraftVocabFileName, ranking(f.ranked, "\n"));
      convert_dflash_draft(dir, tmp, {f.type, 32});
      put("draft_file", f.name, read_all(tmp));
    }
    // llama.cpp's GGUF form (general.architecture dflash) of the small
    // draft, as DFlash and with DFlash2's conv and candidate selector.
    test::Draft d = fuzz::small_dflash_draft();
    d.write_gguf(tmp, 64);
    put("draft_file", "llama-dflash.gguf", read_all(tmp));
    d.make_dflash2(64, 5, 2, 16, 4, 3);
    d.write_gguf(tmp, 64);
    put("draft_file", "llama-dflash2.gguf", read_all(tmp));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR (writes OUT_DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  try {
    write_seeds();
  } catch (const pocket::Error& e) {
    std::fprintf(stderr, "pocket_fuzz_seeds: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
