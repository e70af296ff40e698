#include "convert/create_model.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/tensor_specs.h"
#include "model/synthetic.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_json.h"
#include "util/mapped_file.h"
#include "util/error.h"

namespace pocket::convert {

namespace {

constexpr int64_t kBlockRows = 256;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {  // the byte map only reaches U+0143, so two bytes suffice
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

Vocab synthetic_vocab(int vocab_size) {
  static const char* kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  constexpr int kSpecialCount = 3;
  if (vocab_size < 256 + kSpecialCount)
    fail("synthetic vocabulary: vocab_size ", vocab_size, " is below the ", 256 + kSpecialCount, " tokens it needs");
  Vocab v;
  v.kind = TokenizerKind::ByteLevelBPE;
  v.pre = PreTokenizer::Qwen2;
  v.nfc = true;
  for (unsigned b = 0; b < 256; ++b) {
    v.tokens.push_back(utf8(byte_level::kByteToCp[b]));
    v.types.push_back(TokenType::Normal);
  }
  const int placeholders = vocab_size - 256 - kSpecialCount;
  for (int i = 0; i < placeholders; ++i) {
    v.tokens.push_back("<|tok_" + std::to_string(256 + i) + "|>");
    v.types.push_back(TokenType::Normal);  // plain text pieces, as most of a real vocabulary is
  }
  for (const char* s : kSpecials) {
    v.tokens.emplace_back(s);
    v.types.push_back(TokenType::Control);
  }
  const int32_t first_special = vocab_size - kSpecialCount;
  v.pad_id = first_special;      // <|endoftext|>
  v.eos_id = first_special + 2;  // <|im_end|>
  v.eos_ids = {v.eos_id, v.pad_id};
  return v;
}

const std::string& chatml_template() {
  static const std::string t =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return t;
}

void create_model(const CreateOptions& opt, const std::string& out, const Progress& progress) {
  parse_group(opt.group, "--group");
  ModelConfig c = preset_config(opt.preset);
  Vocab vocab;
  std::string chat_template = chatml_template();
  if (!opt.tokenizer.empty()) {
    std::string json = opt.tokenizer, config;
    if (is_directory(json)) json += "/tokenizer.json";
    const std::string beside = json.substr(0, json.find_last_of('/') + 1) + "tokenizer_config.json";
    if (file_exists(beside)) config = beside;
    std::string tmpl;
    vocab = vocab_from_hf_json(json, config, &tmpl);
    // Its own template, else ChatML when it has the tokens for it, else none.
    const bool chatml = std::find(vocab.tokens.begin(), vocab.tokens.end(), "<|im_start|>") != vocab.tokens.end();
    chat_template = !tmpl.empty() ? tmpl : chatml ? chatml_template() : std::string();
    c.vocab_size = static_cast<int>(vocab.tokens.size());
  } else {
    vocab = synthetic_vocab(c.vocab_size);
  }
  validate_config(c, "preset " + opt.preset);
  GgufWriter w = pocket_writer(c, vocab, chat_template, opt.group);
  auto specs = model_tensor_specs(c);
  auto written = std::make_shared<uint64_t>(0);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    std::vector<int64_t> shape = s.shape();
    const DType type = keep_f32(s.name, shape) ? DType::F32 : opt.weights;
    // Values come in blocks of kBlockRows rows, each its own synthetic_tensor
    // stream, so only one block is in memory and the values do not depend on
    // how the writer chunks the tensor.
    struct Block {
      int64_t index = -1;
      std::vector<float> values;
    };
    auto block = std::make_shared<Block>();
    RowSource source = [block, s, seed = opt.seed](int64_t row0, int64_t n, float* dst) {
      for (int64_t r = row0; r < row0 + n; ++r) {
        const int64_t b = r / kBlockRows;
        if (block->index != b) {
          const int64_t rows = std::min(kBlockRows, s.rows - b * kBlockRows);
          block->values = synthetic_tensor(s.name + "#" + std::to_string(b), rows, s.cols, seed);
          block->index = b;
        }
        std::memcpy(dst + (r - row0) * s.cols, block->values.data() + (r - b * kBlockRows) * s.cols,
                    static_cast<size_t>(s.cols) * sizeof(float));
      }
      if (row0 + n == s.rows) *block = Block{};
    };
    add_streamed_tensor(w, s.name, type, shape, opt.group, std::move(source),
                        [written, i, total = specs.size(), progress](uint64_t nbytes) {
                          *written += nbytes;
                          if (progress) progress(i + 1, total, *written);
                        });
  }
  w.write(out);
}

}  // namespace pocket::convert
