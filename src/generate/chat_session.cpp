#include "generate/chat_session.h"

#include "util/error.h"

namespace pocket {

ChatSession::ChatSession(Session& session, ChatTemplate tmpl, std::string system_prompt, bool enable_thinking)
    : session_(session), tmpl_(tmpl), thinking_(enable_thinking) {
  const Vocab& vocab = session_.tokenizer().vocab();
  if (tmpl_.format() == ChatFormat::Llama3) {
    append({{"<|begin_of_text|>", true}});
  } else if (vocab.add_bos && vocab.bos_id >= 0) {
    tokens_.push_back(vocab.bos_id);
  }
  if (!system_prompt.empty()) {
    if (tmpl_.folds_system())
      pending_system_ = std::move(system_prompt) + "\n\n";
    else
      append(tmpl_.message({"system", std::move(system_prompt)}));
  }
}

void ChatSession::append(const std::vector<ChatPiece>& pieces) {
  auto ids = encode_pieces(session_.tokenizer(), pieces);
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
}

void ChatSession::resume(std::vector<int32_t> tokens) {
  if (tokens.empty()) return;  // a state saved by plain generation: keep the fresh start
  if (tokens != tokens_) pending_system_.clear();  // a turn was taken: it carried the system prompt
  tokens_ = std::move(tokens);
}

GenerateResult ChatSession::send(const std::string& user_text, const GenerateOptions& opt,
                                 const std::function<bool(std::string_view)>& on_text) {
  size_t before = tokens_.size();
  append(tmpl_.message({"user", user_text}, pending_system_));
  append(tmpl_.generation_prompt(thinking_));
  if (tokens_.size() == before) fail_as(ErrorCode::InvalidArgument, "the chat message is empty");
  GenerateResult r;
  try {
    r = session_.generate(tokens_, opt, on_text);
  } catch (...) {
    tokens_.resize(before);  // leave the conversation as it was
    throw;
  }
  tokens_.insert(tokens_.end(), r.tokens.begin(), r.tokens.end());
  append(tmpl_.end_of_reply());
  pending_system_.clear();  // the first user turn carried it
  return r;
}

}  // namespace pocket
