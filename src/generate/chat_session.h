// Multi-turn chat on top of a Session. The conversation is kept as the exact
// tokens the model saw and produced, and each turn only appends to it, so
// the KV cache of earlier turns is reused rather than recomputed.
//
// One documented difference from re-rendering the whole conversation with
// the Qwen3 template: the template drops <think> blocks of earlier assistant
// turns, while a live chat keeps what the model actually generated (as other
// engines with KV reuse do).
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "generate/chat.h"
#include "generate/session.h"

namespace pocket {

class ChatSession {
 public:
  ChatSession(Session& session, ChatTemplate tmpl, std::string system_prompt = {}, bool enable_thinking = true);

  // Adds a user turn, generates the reply and closes the assistant turn.
  GenerateResult send(const std::string& user_text, const GenerateOptions& opt,
                      const std::function<bool(std::string_view)>& on_text = {});

  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Continues a saved conversation (Session::load_state): its tokens
  // replace this chat's (a system prompt given here is then not used).
  void resume(std::vector<int32_t> tokens);
  const ChatTemplate& chat_template() const { return tmpl_; }

 private:
  void append(const std::vector<ChatPiece>& pieces);

  Session& session_;
  ChatTemplate tmpl_;
  bool thinking_;
  std::vector<int32_t> tokens_;
  std::string pending_system_;  // Gemma: opens the first user turn
};

}  // namespace pocket
