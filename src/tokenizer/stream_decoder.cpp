// Streaming decode and display helpers.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include <cstdio>

#include "tokenizer/unicode.h"

namespace pocket {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}

StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(tok) {}

std::string StreamDecoder::push(int32_t id) {
  const std::string bytes = tok_.token_bytes(id);  // validates id
  const size_t skip = tok_.impl_->strips_leading_space(id, prev_) ? 1 : 0;
  prev_ = id;
  pending_.append(bytes, skip);
  std::string out;
  for (;;) {
    size_t tail = 0;
    const size_t ok = unicode::complete_utf8_prefix(pending_, &tail);
    out.append(pending_, 0, ok);
    if (ok + tail == pending_.size()) {  // all emitted, or a valid sequence still incomplete
      pending_.erase(0, ok);
      return out;
    }
    out += kReplacement;  // pending_[ok] can never start valid UTF-8
    pending_.erase(0, ok + 1);
  }
}

std::string StreamDecoder::flush() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
  pending_.clear();
  prev_ = -1;
  return out;
}

std::string display_piece(const Tokenizer& tok, int32_t id) {
  const std::string bytes = tok.token_bytes(id);
  const TokenType t = tok.vocab().types[id];
  if (t == TokenType::Control || t == TokenType::UserDefined) return bytes;
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    size_t len;
    const uint32_t cp = unicode::decode(bytes, i, len);
    char buf[8];
    switch (cp) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (cp < 0x20 || cp == 0x7F || cp >= unicode::kInvalidBase) {
          std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(bytes[i]));
          out += buf;
        } else {
          out.append(bytes, i, len);
        }
    }
    i += len;
  }
  return out;
}

}  // namespace pocket
