#include "tokenizer/tokenizer.h"

#include "util/error.h"

namespace pocket {

struct Tokenizer::Impl {
  Vocab vocab;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::create(Vocab vocab) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(vocab);
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view, const EncodeOptions&) const {
  fail("Tokenizer::encode is not implemented yet");
}
std::string Tokenizer::decode(std::span<const int32_t>) const { fail("Tokenizer::decode is not implemented yet"); }
std::string Tokenizer::token_bytes(int32_t) const { fail("Tokenizer::token_bytes is not implemented yet"); }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
std::optional<int32_t> Tokenizer::token_id(std::string_view) const { return std::nullopt; }
bool Tokenizer::is_eos(int32_t) const { return false; }
bool Tokenizer::is_control(int32_t) const { return false; }
std::vector<uint8_t> Tokenizer::serialize() const { fail("Tokenizer::serialize is not implemented yet"); }
std::shared_ptr<const Tokenizer> Tokenizer::deserialize(const uint8_t*, size_t) {
  fail("Tokenizer::deserialize is not implemented yet");
}

std::string display_piece(const Tokenizer& tok, int32_t id) { return tok.token_bytes(id); }

StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
std::string StreamDecoder::push(int32_t id) { return tok_.token_bytes(id); }
std::string StreamDecoder::flush() { return {}; }

}  // namespace pocket
