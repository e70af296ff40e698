#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/word_cache.h"
#include "util/error.h"

namespace pocket {
namespace {

constexpr const char* kSource = "tokenizer vocab";

// Raw bytes of a byte-level piece; fails if a character is outside the
// GPT-2 byte alphabet.
std::string byte_level_bytes(const std::string& piece, int32_t id) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    size_t len;
    const uint32_t cp = unicode::decode(piece, i, len);
    const int b = byte_level::cp_to_byte(cp);
    if (b < 0) fail(kSource, ": token ", id, " (\"", piece, "\") has a character outside the byte-level alphabet");
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

void check_id(int32_t id, size_t n, const char* what) {
  if (id < -1 || id >= static_cast<int64_t>(n)) fail(kSource, ": ", what, " ", id, " is out of range (", n, " tokens)");
}

}  // namespace

std::string sentencepiece_text(const std::string& piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(piece[i]);
    }
  }
  return out;
}

int sentencepiece_byte(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void Tokenizer::Impl::build() {
  const Vocab& v = vocab;
  const size_t n = v.tokens.size();
  if (n == 0) fail(kSource, ": no tokens");
  if (n > static_cast<size_t>(INT32_MAX / 2)) fail(kSource, ": ", n, " tokens is too many");
  if (v.types.size() != n) fail(kSource, ": ", v.types.size(), " token types for ", n, " tokens");
  if (!v.scores.empty() && v.scores.size() != n) fail(kSource, ": ", v.scores.size(), " scores for ", n, " tokens");
  if (v.kind != TokenizerKind::ByteLevelBPE && v.kind != TokenizerKind::SentencePieceBPE)
    fail(kSource, ": unknown tokenizer kind ", static_cast<int>(v.kind));
  if (static_cast<uint8_t>(v.pre) > static_cast<uint8_t>(PreTokenizer::GPT2))
    fail(kSource, ": unknown pre-tokenizer ", static_cast<int>(v.pre));
  for (size_t i = 0; i < n; ++i)
    if (static_cast<uint8_t>(v.types[i]) > static_cast<uint8_t>(TokenType::Unused))
      fail(kSource, ": token ", i, " has unknown type ", static_cast<int>(v.types[i]));
  check_id(v.bos_id, n, "bos_id");
  check_id(v.eos_id, n, "eos_id");
  check_id(v.pad_id, n, "pad_id");
  check_id(v.unk_id, n, "unk_id");
  for (int32_t id : v.eos_ids) {
    if (id < 0) fail(kSource, ": eos id ", id, " is negative");
    check_id(id, n, "eos id");
  }

  const bool byte_level = v.kind == TokenizerKind::ByteLevelBPE;
  byte_ids.fill(-1);
  bytes.resize(n);
  std::vector<int32_t> all_ids, text_token_ids;
  all_ids.reserve(n);
  text_token_ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const TokenType t = v.types[i];
    const std::string& piece = v.tokens[i];
    all_ids.push_back(id);
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown || t == TokenType::Unused) {
      bytes[i] = piece;  // added/special tokens decode to their text
    } else if (byte_level) {
      bytes[i] = byte_level_bytes(piece, id);
    } else if (t == TokenType::Byte) {
      const int b = sentencepiece_byte(piece);
      if (b < 0) fail(kSource, ": byte token ", id, " is \"", piece, "\", not <0xNN>");
      bytes[i] = std::string(1, static_cast<char>(b));
      if (byte_ids[b] < 0) byte_ids[b] = id;
    } else {
      bytes[i] = sentencepiece_text(piece);
    }
    if (t == TokenType::Normal || (!byte_level && t == TokenType::UserDefined)) {
      if (bytes[i].empty()) fail(kSource, ": token ", id, " is empty");
      text_token_ids.push_back(id);
    }
    if ((t == TokenType::Control || t == TokenType::UserDefined) && !piece.empty()) {
      specials_by_first_byte[static_cast<unsigned char>(piece[0])].push_back({piece, id, t == TokenType::Control});
      has_specials = true;
      has_user_defined |= t == TokenType::UserDefined;
    }
  }
  piece_ids.build(&vocab.tokens, all_ids);
  text_ids.build(&bytes, text_token_ids);
  for (auto& list : specials_by_first_byte)
    std::stable_sort(list.begin(), list.end(), [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });

  if (byte_level) {
    for (int b = 0; b < 256; ++b) {
      byte_ids[b] = text_ids.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      if (byte_ids[b] < 0) fail(kSource, ": byte-level vocab has no token for byte 0x", std::hex, b);
    }
    merges.reserve(v.merges.size());
    std::vector<int16_t> byte_of_id(n, -1);  // for the dense byte-pair table
    for (int b = 0; b < 256; ++b) byte_of_id[byte_ids[b]] = static_cast<int16_t>(b);
    byte_pairs.assign(256 * 256, {});
    // Ids a loader already resolved are checked against the pieces (cheap,
    // in order) instead of being looked up again (random access, slow).
    const std::vector<std::array<int32_t, 3>>* given_merges = v.merge_ids.empty() ? nullptr : &v.merge_ids;
    if (given_merges && given_merges->size() != v.merges.size()) fail(kSource, ": merge id table size mismatch");
    merge_ids.resize(v.merges.size());
    std::string joined;
    for (size_t r = 0; r < v.merges.size(); ++r) {
      const auto& [a, b] = v.merges[r];
      std::array<int32_t, 3> m;
      if (given_merges) {
        m = (*given_merges)[r];
        for (int32_t id : m)
          if (id < 0 || static_cast<size_t>(id) >= n) fail(kSource, ": merge ", r, " refers to token ", id);
        const std::string& c = v.tokens[m[2]];
        if (v.tokens[m[0]] != a || v.tokens[m[1]] != b || c.size() != a.size() + b.size() || !c.starts_with(a) ||
            !c.ends_with(b))
          fail(kSource, ": merge ", r, " does not join its two tokens into the merged token");
      } else {
        joined.assign(a).append(b);
        m = {piece_ids.find(a), piece_ids.find(b), piece_ids.find(joined)};
      }
      if (m[0] < 0 || m[1] < 0 || m[2] < 0)
        fail(kSource, ": merge ", r, " (\"", a, "\" \"", b, "\") refers to a token not in the vocab");
      if (merges.insert(m[0], m[1], {static_cast<int32_t>(r), m[2]}) && byte_of_id[m[0]] >= 0 &&
          byte_of_id[m[1]] >= 0)
        byte_pairs[(byte_of_id[m[0]] << 8) | byte_of_id[m[1]]] = {static_cast<int32_t>(r), m[2]};
      merge_ids[r] = m;
    }
  } else {
    if (v.scores.size() != n) fail(kSource, ": a SentencePiece vocab needs one score per token");
    bool all_bytes = true;
    for (int32_t id : byte_ids) all_bytes = all_bytes && id >= 0;
    if (!all_bytes && v.unk_id < 0)
      fail(kSource, ": a SentencePiece vocab needs an unk token or all 256 <0xNN> byte tokens");
  }
}

bool Tokenizer::Impl::strips_leading_space(int32_t id, int32_t prev) const {
  // Like SentencePiece/HF (and llama2.c): the space the encoder prepended is
  // dropped from the first piece of the text, i.e. at the start or after BOS.
  return vocab.kind == TokenizerKind::SentencePieceBPE && vocab.add_space_prefix &&
         (prev < 0 || prev == vocab.bos_id) && vocab.types[id] == TokenType::Normal && !bytes[id].empty() &&
         bytes[id][0] == ' ';
}

void Tokenizer::Impl::encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (vocab.nfc) text = unicode::nfc(text, normalized);
  if (vocab.kind == TokenizerKind::SentencePieceBPE) {
    // SentencePiece escapes a space as U+2581 before it splits, so a literal
    // U+2581 in the text is a space too (SentencePiece, HF and llama.cpp
    // agree); the pieces here spell it ' ', so the text does as well.
    std::string spaced = vocab.add_space_prefix && at_start ? " " : "";
    for (size_t i = 0; i < text.size();) {
      const size_t at = text.find("\xE2\x96\x81", i);
      spaced.append(text.substr(i, at == std::string_view::npos ? std::string_view::npos : at - i));
      if (at == std::string_view::npos) break;
      spaced.push_back(' ');
      i = at + 3;
    }
    bpe_sentencepiece(spaced, out);
    return;
  }
  std::string spaced;
  if (vocab.add_space_prefix && text[0] != ' ') {  // HF ByteLevel(add_prefix_space): per segment
    spaced = " ";
    spaced += text;
    text = spaced;
  }
  std::vector<uint32_t> ends;
  pretokenize(vocab.pre, text, ends);
  BpeScratch scratch;
  // Short texts (a chat turn) skip the cache: setting it up costs more than
  // it saves there.
  std::optional<tok_detail::WordCache> cache;
  if (ends.size() > 64) cache.emplace(text);
  uint32_t begin = 0;
  for (uint32_t end : ends) {
    const std::string_view word = text.substr(begin, end - begin);
    begin = end;
    if (word.size() == 1) {
      out.push_back(byte_ids[static_cast<unsigned char>(word[0])]);
      continue;
    }
    if (!cache) {
      bpe_byte_level(word, scratch, out);
      continue;
    }
    bool found;
    tok_detail::WordCache::Hit* hit = cache->find(word, found);
    if (found) {
      for (uint32_t k = 0; k < hit->count; ++k) out.push_back(out[hit->at + k]);
      continue;
    }
    hit->at = static_cast<uint32_t>(out.size());
    bpe_byte_level(word, scratch, out);
    hit->count = static_cast<uint32_t>(out.size()) - hit->at;
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::create(Vocab vocab) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  impl->build();
  impl->vocab.merge_ids = {};  // now held, checked, in impl->merge_ids
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& opt) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (opt.add_bos && m.vocab.bos_id >= 0) out.push_back(m.vocab.bos_id);
  // Added tokens are split out first: user-defined ones always (as Hugging
  // Face and llama.cpp match them), control tokens only when allowed.
  if (!(opt.allow_special ? m.has_specials : m.has_user_defined)) {
    m.encode_segment(text, true, out);
    return out;
  }
  // Leftmost match, longest at a position.
  size_t seg_begin = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& candidates = m.specials_by_first_byte[static_cast<unsigned char>(text[i])];
    const Impl::Special* hit = nullptr;
    for (const auto& s : candidates)
      if ((opt.allow_special || !s.control) && text.compare(i, s.text.size(), s.text) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    m.encode_segment(text.substr(seg_begin, i - seg_begin), seg_begin == 0, out);
    out.push_back(hit->id);
    i += hit->text.size();
    seg_begin = i;
  }
  m.encode_segment(text.substr(seg_begin), seg_begin == 0, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      fail_as(ErrorCode::InvalidArgument, "decode: token id ", id, " is out of range (vocab size ", vocab_size(), ")");
    const std::string& b = impl_->bytes[id];
    out.append(b, impl_->strips_leading_space(id, prev) ? 1 : 0);
    prev = id;
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) fail("token id ", id, " is out of range (vocab size ", vocab_size(), ")");
  return impl_->bytes[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
const Vocab& Tokenizer::vocab() const { return impl_->vocab; }

std::optional<int32_t> Tokenizer::token_id(std::string_view piece) const {
  const int32_t id = impl_->piece_ids.find(piece);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

bool Tokenizer::is_eos(int32_t id) const {
  const Vocab& v = impl_->vocab;
  return id >= 0 && (id == v.eos_id || std::find(v.eos_ids.begin(), v.eos_ids.end(), id) != v.eos_ids.end());
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->vocab.types[id] == TokenType::Control;
}

}  // namespace pocket
