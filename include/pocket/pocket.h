// Pocket's public C++ API: open a model, generate text, chat.
//
//   auto engine = pocket::Engine::open("model.gguf");
//   pocket::GenerationOptions opt;
//   opt.max_tokens = 64;
//   std::string text = engine->generate("Once upon a time", opt);
//   std::string reply = engine->chat("Hello!", opt);   // multi-turn, KV cache reused
//
// Every failure throws pocket::Error with a message naming the problem.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pocket/error.h"

namespace pocket {

struct EngineOptions {
  std::string tokenizer_path;  // llama2.c checkpoints: tokenizer.bin (else found beside the model)
  int threads = 0;             // 0 = all cores
  int context = 0;             // 0 = the model's context length, at most 4096
  std::string system_prompt;   // for chat()
  bool enable_thinking = true; // Qwen3 chat: false adds an empty <think></think> block
};

struct GenerationOptions {
  int max_tokens = 256;
  float temperature = 0.8f;  // 0 = greedy
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
};

struct GenerationStats {
  int prompt_tokens = 0;
  int reused_tokens = 0;  // prompt tokens whose KV cache was reused
  int generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::string stop_reason;  // "eos", "stop string", "max tokens", "context full", "stopped by caller"
};

// Called with each piece of generated text (always complete UTF-8); return
// false to stop generating.
using TextCallback = std::function<bool(std::string_view)>;

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::string& model_path, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Continues `prompt` as plain text (no chat template).
  std::string generate(const std::string& prompt, const GenerationOptions& options = {},
                       const TextCallback& on_text = {}, GenerationStats* stats = nullptr);

  // Sends one user message in the running conversation and returns the reply.
  std::string chat(const std::string& user_message, const GenerationOptions& options = {},
                   const TextCallback& on_text = {}, GenerationStats* stats = nullptr);
  // Forgets the conversation (and the KV cache).
  void reset();

  std::vector<int32_t> tokenize(std::string_view text, bool allow_special = false) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

  std::string architecture() const;
  int context_size() const;
  int vocab_size() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pocket
