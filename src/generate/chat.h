// Chat templates. Pocket renders the common template families natively
// instead of interpreting Jinja: the family is detected from the template
// text shipped with the model (tokenizer_config.json / GGUF
// tokenizer.chat_template) and rendered by code that reproduces it for
// system / user / assistant messages.
//
// Rendering yields pieces marked as template structure (special tokens such
// as <|im_start|>, matched as tokens) or as text (encoded as plain text, so a
// user cannot inject control tokens through a message).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pocket {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatPiece {
  std::string text;
  bool special = false;  // an exact special-token string from the template
};

enum class ChatFormat {
  Qwen3,   // ChatML with <think> handling (Qwen3)
  ChatML,  // <|im_start|>role\ncontent<|im_end|>\n (Qwen2, many others)
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  Gemma,   // <start_of_turn>user\ncontent<end_of_turn>\n; assistant is "model"; the
           // system message is folded into the first user turn
  Raw,     // no template: messages are concatenated as plain text
};

const char* chat_format_name(ChatFormat f);

// Picks the family from the template source; an empty template gives Raw,
// or Gemma when the vocabulary has <start_of_turn>/<end_of_turn> (Gemma
// GGUFs often ship without a template). Unknown non-empty templates fall
// back to ChatML when the tokenizer has <|im_start|>, else Raw;
// `*recognised` tells the caller that a fallback was taken.
ChatFormat detect_chat_format(const std::string& jinja_source, const Tokenizer& tok, bool* recognised = nullptr);

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;  // Qwen3: false appends an empty <think></think> block
};

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatFormat f) : format_(f) {}
  ChatFormat format() const { return format_; }

  // The whole conversation, as the original template renders it.
  std::vector<ChatPiece> render(std::span<const ChatMessage> messages, const ChatOptions& opt) const;

  // Building blocks for incremental chat (Chat keeps the tokens it
  // generated and appends only new turns).
  // One complete system/user turn; `system_prefix` opens a Gemma user turn
  // (folds_system(): the system text and "\n\n").
  std::vector<ChatPiece> message(const ChatMessage& m, const std::string& system_prefix = {}) const;
  std::vector<ChatPiece> generation_prompt(bool enable_thinking) const;  // opens the assistant turn
  std::vector<ChatPiece> end_of_reply() const;                           // closes an assistant turn
  // Gemma has no system turn: the system text and a blank line open the
  // first user message instead (message() refuses a system message).
  bool folds_system() const { return format_ == ChatFormat::Gemma; }

 private:
  void append_assistant(std::vector<ChatPiece>& out, const std::string& content, bool after_last_query,
                        bool is_last) const;
  ChatFormat format_;
};

std::string pieces_text(std::span<const ChatPiece> pieces);

// Encodes pieces: special pieces must be tokens of the vocabulary (else a
// pocket::Error names the missing token); text pieces are plain text.
// Adjacent text pieces are joined first, as Hugging Face tokenizes the text
// between special tokens as one string.
std::vector<int32_t> encode_pieces(const Tokenizer& tok, std::span<const ChatPiece> pieces);

}  // namespace pocket
