#include "generate/chat.h"

#include "util/error.h"

namespace pocket {

namespace {

ChatPiece S(std::string t) { return {std::move(t), true}; }
ChatPiece T(std::string t) { return {std::move(t), false}; }

std::string strip(const std::string& s, const char* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && std::string_view(chars).find(s[b]) != std::string_view::npos) ++b;
  if (right)
    while (e > b && std::string_view(chars).find(s[e - 1]) != std::string_view::npos) --e;
  return s.substr(b, e - b);
}

}  // namespace

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::Qwen3:
      return "qwen3";
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::Raw:
      return "raw";
  }
  return "?";
}

ChatFormat detect_chat_format(const std::string& src, const Tokenizer& tok, bool* recognised) {
  auto has = [&](const char* s) { return src.find(s) != std::string::npos; };
  if (recognised) *recognised = true;
  if (has("<|im_start|>")) return has("<think>") || has("enable_thinking") ? ChatFormat::Qwen3 : ChatFormat::ChatML;
  if (has("<|start_header_id|>")) return ChatFormat::Llama3;
  if (has("<start_of_turn>")) return ChatFormat::Gemma;
  const bool gemma_vocab = tok.token_id("<start_of_turn>") && tok.token_id("<end_of_turn>");
  if (src.empty()) {
    if (!gemma_vocab) return ChatFormat::Raw;
    if (recognised) *recognised = false;  // inferred from the vocabulary
    return ChatFormat::Gemma;
  }
  if (recognised) *recognised = false;
  return tok.token_id("<|im_start|>") ? ChatFormat::ChatML : ChatFormat::Raw;
}

std::vector<ChatPiece> ChatTemplate::message(const ChatMessage& m, const std::string& system_prefix) const {
  switch (format_) {
    case ChatFormat::Qwen3:
    case ChatFormat::ChatML:
      return {S("<|im_start|>"), T(m.role + "\n" + m.content), S("<|im_end|>"), T("\n")};
    case ChatFormat::Llama3:
      return {S("<|start_header_id|>"), T(m.role), S("<|end_header_id|>"), T("\n\n" + strip(m.content, " \t\n\r", true, true)),
              S("<|eot_id|>")};
    case ChatFormat::Gemma:
      if (m.role == "system") fail("the gemma chat format has no system turn (it opens the first user message)");
      // The template trims the content, not the system prefix before it.
      return {S("<start_of_turn>"),
              T((m.role == "assistant" ? "model\n" : m.role + "\n") + system_prefix + strip(m.content, " \t\n\r", true, true)),
              S("<end_of_turn>"), T("\n")};
    case ChatFormat::Raw:
      return {T(m.content)};
  }
  return {};
}

std::vector<ChatPiece> ChatTemplate::generation_prompt(bool enable_thinking) const {
  switch (format_) {
    case ChatFormat::Qwen3:
      if (!enable_thinking) return {S("<|im_start|>"), T("assistant\n"), S("<think>"), T("\n\n"), S("</think>"), T("\n\n")};
      return {S("<|im_start|>"), T("assistant\n")};
    case ChatFormat::ChatML:
      return {S("<|im_start|>"), T("assistant\n")};
    case ChatFormat::Llama3:
      return {S("<|start_header_id|>"), T("assistant"), S("<|end_header_id|>"), T("\n\n")};
    case ChatFormat::Gemma:
      return {S("<start_of_turn>"), T("model\n")};
    case ChatFormat::Raw:
      return {};
  }
  return {};
}

std::vector<ChatPiece> ChatTemplate::end_of_reply() const {
  switch (format_) {
    case ChatFormat::Qwen3:
    case ChatFormat::ChatML:
      return {S("<|im_end|>"), T("\n")};
    case ChatFormat::Llama3:
      return {S("<|eot_id|>")};
    case ChatFormat::Gemma:
      return {S("<end_of_turn>"), T("\n")};
    case ChatFormat::Raw:
      return {T("\n")};
  }
  return {};
}

// Qwen3 keeps the <think> block only for assistant turns after the last user
// query; earlier turns show the final answer only.
void ChatTemplate::append_assistant(std::vector<ChatPiece>& out, const std::string& content, bool after_last_query,
                                    bool is_last) const {
  if (format_ != ChatFormat::Qwen3) {
    ChatMessage m{"assistant", content};
    for (auto& p : message(m)) out.push_back(std::move(p));
    return;
  }
  std::string answer = content, reasoning;
  size_t end = content.rfind("</think>");
  if (end != std::string::npos) {
    answer = strip(content.substr(end + 8), "\n", true, false);
    std::string before = content.substr(0, content.find("</think>"));
    size_t open = before.rfind("<think>");
    reasoning = strip(strip(open == std::string::npos ? before : before.substr(open + 7), "\n", false, true), "\n",
                      true, false);
  }
  out.push_back(S("<|im_start|>"));
  if (after_last_query && (is_last || !reasoning.empty())) {
    out.push_back(T("assistant\n"));
    out.push_back(S("<think>"));
    std::string thought = "\n";  // built by appending: GCC 12 misreports "a" + s + "b" (-Wrestrict)
    thought += strip(reasoning, "\n", true, true);
    thought += '\n';
    out.push_back(T(std::move(thought)));
    out.push_back(S("</think>"));
    out.push_back(T("\n\n" + strip(answer, "\n", true, false)));
  } else {
    out.push_back(T("assistant\n" + answer));
  }
  out.push_back(S("<|im_end|>"));
  out.push_back(T("\n"));
}

std::vector<ChatPiece> ChatTemplate::render(std::span<const ChatMessage> messages, const ChatOptions& opt) const {
  std::vector<ChatPiece> out;
  if (format_ == ChatFormat::Llama3) out.push_back(S("<|begin_of_text|>"));
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;)
    if (messages[i].role == "user") {
      last_query = i;
      break;
    }
  // Gemma: a leading system message becomes the first user turn's prefix,
  // and the rest must alternate user / assistant, as its template demands.
  std::string system_prefix;
  size_t first = 0;
  if (folds_system() && !messages.empty() && messages[0].role == "system") {
    system_prefix = messages[0].content + "\n\n";
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      fail("chat message ", i, " has role '", m.role, "'; expected system, user or assistant");
    if (folds_system() && (m.role == "user") != ((i - first) % 2 == 0))
      fail("chat message ", i, " is '", m.role, "': the gemma chat format needs user and assistant turns to alternate, "
           "starting with user (a system message may come first)");
    if (m.role == "assistant") {
      append_assistant(out, m.content, i > last_query, i + 1 == messages.size());
    } else {
      for (auto& p : message(m, i == first ? system_prefix : std::string())) out.push_back(std::move(p));
    }
  }
  if (opt.add_generation_prompt)
    for (auto& p : generation_prompt(opt.enable_thinking)) out.push_back(std::move(p));
  return out;
}

std::string pieces_text(std::span<const ChatPiece> pieces) {
  std::string s;
  for (const auto& p : pieces) s += p.text;
  return s;
}

std::vector<int32_t> encode_pieces(const Tokenizer& tok, std::span<const ChatPiece> pieces) {
  std::vector<int32_t> ids;
  std::string text;
  auto flush = [&] {
    if (text.empty()) return;
    auto part = tok.encode(text);
    ids.insert(ids.end(), part.begin(), part.end());
    text.clear();
  };
  for (const auto& p : pieces) {
    if (!p.special) {
      text += p.text;
      continue;
    }
    flush();
    auto id = tok.token_id(p.text);
    if (!id) fail("the chat template needs the token ", p.text, " but the vocabulary has no such token");
    ids.push_back(*id);
  }
  flush();
  return ids;
}

}  // namespace pocket
