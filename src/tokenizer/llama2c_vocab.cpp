#include "tokenizer/llama2c_vocab.h"

#include <cmath>
#include <cstdio>

#include "util/byte_reader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

Vocab vocab_from_llama2c_bytes(const uint8_t* data, size_t size, int vocab_size, const std::string& source) {
  if (vocab_size <= 0) fail(source, ": vocab_size must be positive, got ", vocab_size);
  ByteReader r(data, size, source);
  const int32_t max_len = r.i32("max_token_length");
  if (max_len <= 0) fail(source, ": max_token_length must be positive, got ", max_len);
  // Each entry takes at least 8 bytes (score + length): reject absurd counts
  // before reserving memory for them.
  if (static_cast<uint64_t>(vocab_size) > r.remaining() / 8)
    fail(source, ": vocab_size ", vocab_size, " does not fit in the ", size, "-byte file");

  Vocab v;
  v.kind = TokenizerKind::SentencePieceBPE;
  v.add_space_prefix = true;  // llama2.c's encode() prepends " " to non-empty text
  v.tokens.reserve(vocab_size);
  v.scores.reserve(vocab_size);
  v.types.reserve(vocab_size);
  for (int i = 0; i < vocab_size; ++i) {
    const float score = r.f32("token score");
    const int32_t len = r.i32("token length");
    if (len < 0 || len > max_len)
      fail(source, ": token ", i, " has length ", len, " (max_token_length ", max_len, ")");
    if (!std::isfinite(score)) fail(source, ": token ", i, " has a non-finite score");
    v.tokens.emplace_back(r.str(static_cast<uint64_t>(len), "token bytes"));
    v.scores.push_back(score);
    v.types.push_back(TokenType::Normal);
  }
  // llama2.c conventions: 0 <unk>, 1 <s>, 2 </s>, then <0x00>..<0xFF> if the
  // vocabulary was trained with byte fallback.
  if (vocab_size > 0) v.unk_id = 0;
  if (vocab_size > 1) v.bos_id = 1;
  v.add_bos = v.bos_id >= 0;  // llama2.c always starts a sequence with BOS
  if (vocab_size > 2) v.eos_id = 2;
  if (v.eos_id >= 0) v.eos_ids = {v.eos_id};
  // llama2.c models delimit stories with BOS, and run.c stops when it is sampled.
  if (v.bos_id >= 0) v.eos_ids.push_back(v.bos_id);
  for (int i = 0; i < vocab_size && i < 3; ++i) v.types[i] = i == 0 ? TokenType::Unknown : TokenType::Control;
  // llama2.c's exporter wraps the control pieces in newlines ("\n<s>\n");
  // use SentencePiece's names so they decode and match like everywhere else.
  static constexpr const char* kControlNames[] = {"<unk>", "<s>", "</s>"};
  for (int i = 0; i < vocab_size && i < 3; ++i) {
    const std::string& t = v.tokens[i];
    if (t.size() >= 2 && t.front() == '\n' && t.back() == '\n' && t.substr(1, t.size() - 2) == kControlNames[i])
      v.tokens[i] = kControlNames[i];
  }
  for (int i = 3; i < vocab_size && i < 259; ++i) {
    char want[8];
    std::snprintf(want, sizeof want, "<0x%02X>", i - 3);
    if (v.tokens[i] == want) v.types[i] = TokenType::Byte;
  }
  return v;
}

Vocab vocab_from_llama2c(const std::string& path, int vocab_size) {
  auto file = MappedFile::open(path);
  return vocab_from_llama2c_bytes(file->data(), file->size(), vocab_size, path);
}

}  // namespace pocket
