#include "server/prompt.h"

namespace pocket::server {

std::vector<int32_t> prompt_tokens(const LoadedModel& m, const CompletionRequest& r, bool enable_thinking) {
  const Vocab& vocab = m.tokenizer->vocab();
  if (r.endpoint == Endpoint::Completion) {
    EncodeOptions eo;
    eo.add_bos = vocab.add_bos;
    return m.tokenizer->encode(r.prompt, eo);
  }
  // BOS as `pocket run --chat` and ChatSession add it (Llama 3's template
  // writes its own <|begin_of_text|>).
  std::vector<int32_t> ids;
  if (vocab.add_bos && vocab.bos_id >= 0 && m.chat_format != ChatFormat::Llama3) ids.push_back(vocab.bos_id);
  ChatOptions co;
  co.enable_thinking = enable_thinking;
  auto body = encode_pieces(*m.tokenizer, ChatTemplate(m.chat_format).render(r.messages, co));
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace pocket::server
