// Loader for Hugging Face tokenizer.json (+ tokenizer_config.json).
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/vocab.h"

namespace pocket {

// Parses a Hugging Face tokenizer.json (and optionally tokenizer_config.json,
// "" if absent) into a Vocab. Supported: model BPE (byte-level, or
// SentencePiece-style with byte_fallback), normalizer null/NFC/Sequence[NFC],
// the Qwen2, Llama-3 and GPT-2 pre-tokenizers, added_tokens. Anything else is
// a pocket::Error naming the file and the unsupported field.
// Also returns the chat_template string from tokenizer_config.json in
// *chat_template (if non-null; "" if none), and fills vocab.eos_ids/bos/pad
// from the config (eos_token, pad_token, bos_token, add_bos_token).
Vocab vocab_from_hf_json(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path,
                         std::string* chat_template);

// Same, from in-memory JSON text; `source` names the input in errors.
Vocab vocab_from_hf_json_text(std::string_view tokenizer_json, const std::string& tokenizer_config,
                              const std::string& source, std::string* chat_template);

}  // namespace pocket
