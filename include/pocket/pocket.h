// Pocket's public C++ API: open a model, generate text, chat.
//
//   auto engine = pocket::Engine::open("model.gguf");
//   pocket::GenerationOptions opt;
//   opt.max_tokens = 64;
//   std::string text = engine->generate("Once upon a time", opt);
//   std::string reply = engine->chat("Hello!", opt);   // multi-turn, KV cache reused
//
// Several engines on one model (the weights mapped once; each engine adds
// only its KV cache, scratch buffers and worker threads):
//
//   auto model = pocket::SharedModel::open("model.gguf");
//   auto a = pocket::Engine::create(model), b = pocket::Engine::create(model);
//
// Every failure throws pocket::Error with a message naming the problem and a
// code saying what kind of failure it is (pocket/error.h).
//
// Threads: a SharedModel may be used from any number of threads at once. An
// Engine runs one call at a time (a second thread's generate/chat/reset
// while one runs throws Error with ErrorCode::Busy); cancel() and the const
// members may be called from any thread at any time.
// The C API (pocket/pocket_c.h) is a thin layer over this one.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pocket/error.h"

namespace pocket {

enum class LogLevel { Debug, Info, Warning, Error };

struct ModelOptions {
  std::string tokenizer_path;  // llama2.c checkpoints: tokenizer.bin (else found beside the model)
  // Called while loading with the fraction done, from 0 to 1, on the thread
  // that opens the model; return false to stop loading (open() then throws
  // Error with ErrorCode::Cancelled).
  std::function<bool(float)> on_progress;
  // Messages about this model and the engines on it: what was loaded, notes
  // (an unrecognised chat template), failures the C API reports. Called on the thread whose
  // call logs, never concurrently for one model (calls are serialised by a
  // lock held by the model: the callback must not call back into Pocket).
  std::function<void(LogLevel, std::string_view)> on_log;
  LogLevel log_level = LogLevel::Info;  // messages below this level are not passed on
};

// A loaded model: weights (memory-mapped, used in place), tokenizer and chat
// template, shared by any number of engines. Immutable, so safe to use from
// several threads at once. Freed when the last engine and handle let go.
struct MemoryRequest;

class SharedModel {
 public:
  static std::shared_ptr<const SharedModel> open(const std::string& model_path, const ModelOptions& options = {});
  ~SharedModel();
  SharedModel(const SharedModel&) = delete;
  SharedModel& operator=(const SharedModel&) = delete;

  std::vector<int32_t> tokenize(std::string_view text, bool allow_special = false) const;
  std::string detokenize(std::span<const int32_t> ids) const;

  std::string architecture() const;
  int context_length() const;  // the model's (an engine's context may be smaller)
  int vocab_size() const;
  int n_layers() const;
  const std::string& path() const;

  // Passes a message to ModelOptions::on_log (if at or above its level).
  void log(LogLevel level, std::string_view message) const;

 private:
  friend class Engine;
  friend class Decider;
  struct Impl;
  explicit SharedModel(std::unique_ptr<Impl> impl);
  // open() under a memory budget's plan (Engine::open with mem_budget_mb).
  static std::shared_ptr<const SharedModel> open(const std::string& model_path, const ModelOptions& options,
                                                 const MemoryRequest* budget);
  std::unique_ptr<Impl> impl_;
};

struct EngineOptions {
  std::string tokenizer_path;  // open() only: llama2.c checkpoints' tokenizer.bin (else found beside the model)
  int threads = 0;             // 0 = all cores
  int context = 0;             // 0 = the model's context length, at most 4096
  std::string system_prompt;   // for chat()
  bool enable_thinking = true; // Qwen3 chat: false adds an empty <think></think> block
  // Hard memory budget in MiB (0 = none): the model's resident weights,
  // tokenizer, this engine's KV cache, scratch and an overhead allowance
  // must fit, else open()/create() throw InvalidArgument giving the numbers.
  // With context 0 the largest context that fits is chosen (context_size()).
  // open() plans before the weights are read in; create() counts the shared
  // model's weights as if this engine were alone on it.
  int mem_budget_mb = 0;
  int batch = 0;  // prompt tokens per forward pass (chunked prefill), 1-128; 0 = 128
  // KV cache type: "f16", "q8" (int8 rows with a scale each: about half the
  // memory) or "q4" (4-bit: about a quarter). Empty: f16, or under a memory
  // budget the plan's choice (f16 when the context fits with it, else q8;
  // kv_cache_type() says which).
  std::string kv;
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
  // Called after each batch of the prompt (Model::kMaxBatch tokens) with
  // the fraction of its new tokens processed; return false to stop (stop
  // reason "cancelled"; the batches done stay in the KV cache).
  std::function<bool(float)> on_prefill_progress;
  // Structured output: the output must match this constraint (JSON Schema,
  // any JSON, regex, list of choices or GBNF grammar); end-of-sequence only
  // where it is complete. An unsupported schema keyword or a bad grammar is
  // an Error naming it. kind: "" (none), "json-schema", "json", "regex",
  // "choice", "grammar".
  struct Constraint {
    std::string kind;
    std::string text;                  // the schema, regex or GBNF text
    std::vector<std::string> choices;  // for "choice"
    int json_whitespace = 0;           // JSON: whitespace allowed between tokens (0 = compact)
    bool json_open = false;            // json-schema: absent additionalProperties / items (after prefixItems)
                                       // allow more, as the spec says; default closed, as OpenAI's strict mode
  } constraint;
};

struct GenerationStats {
  int prompt_tokens = 0;
  int reused_tokens = 0;  // prompt tokens whose KV cache was reused
  int generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int context_used = 0;  // tokens in the engine's KV cache after the call
  // "eos", "stop string", "max tokens", "context full", "stopped by caller"
  // (the text callback returned false), "cancelled" (Engine::cancel)
  std::string stop_reason;
  // With a constraint: the output is a complete match ("constraint
  // complete" or "eos" stops); false when it ran out of tokens or context.
  bool constraint_complete = false;
};

// Called with each piece of generated text (always complete UTF-8); return
// false to stop generating.
using TextCallback = std::function<bool(std::string_view)>;

class PrefixCache;

// A prefilled prompt prefix shared read-only between engines (Engine::share_chat_start).
class SharedPrefix {
 public:
  int tokens() const;  // its length in tokens
  size_t bytes() const;  // memory it holds (its KV rows)

 private:
  friend class Engine;
  explicit SharedPrefix(std::shared_ptr<const PrefixCache> cache) : cache_(std::move(cache)) {}
  std::shared_ptr<const PrefixCache> cache_;
};

class Engine {
 public:
  // Opens the model for this engine alone.
  static std::unique_ptr<Engine> open(const std::string& model_path, const EngineOptions& options = {});
  // An engine on a model opened once (options.tokenizer_path is not used).
  static std::unique_ptr<Engine> create(std::shared_ptr<const SharedModel> model, const EngineOptions& options = {});
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

  // Saved sessions: writes the conversation and the KV cache (as stored)
  // to `path`, atomically, with the model's fingerprint. load_state replaces
  // this engine's conversation with a saved one; it must come from the same
  // model and KV type and fit this engine's context, else it throws (and
  // the engine is left as it was). The restored conversation continues
  // exactly as the saved one would have.
  void save_state(const std::string& path);
  void load_state(const std::string& path);

  // One model, many sessions: a long system prompt prefilled once and shared
  // read-only. share_chat_start() starts a new conversation on this engine,
  // prefills its start (the beginning-of-sequence token and the system
  // prompt, as the chat template renders them before the first user turn)
  // and returns it; use_prefix() starts a new conversation on another engine
  // of the same model from a copy of those KV rows instead of prefilling
  // them again (a faster first token; the replies are those of a prefill).
  // An engine whose system prompt differs simply recomputes from where the
  // tokens differ. A prefix from another model or longer than the context
  // throws (the engine is left as it was).
  std::shared_ptr<const SharedPrefix> share_chat_start();
  void use_prefix(const SharedPrefix& prefix);

  // Stops the generate() or chat() running on this engine, from any thread:
  // the call returns within one decode step (or one batch of the prompt)
  // with stop reason "cancelled", keeping what it generated. When no call
  // is running it does nothing (a later call is not affected).
  void cancel();

  // Worker threads for the forward pass (>= 1; results are identical for any count).
  void set_threads(int threads);
  int threads() const;

  std::vector<int32_t> tokenize(std::string_view text, bool allow_special = false) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

  std::string architecture() const;
  int context_size() const;
  std::string kv_cache_type() const;  // "f16", "q8" or "q4": as asked, or as the memory plan chose
  int vocab_size() const;
  const std::shared_ptr<const SharedModel>& model() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- Decision heads: classify, route and rank in one prefill -------------
//
//   auto model = pocket::SharedModel::open("model.pq4");
//   auto d = pocket::Decider::create(model);
//   d->add_head("intent.head");                     // trained by `pocket train-head`
//   pocket::Classification c = d->classify("intent", "wake me at 7");
//   auto order = d->rank("best pizza nearby", {"Luigi's pizzeria", "tyre repair"});
//
// Heads stored in the model's Pocket file are added at create(). A head names
// its base model's content hash; adding one trained on another model throws.
// Like an Engine, a Decider runs one call at a time (a concurrent call
// throws ErrorCode::Busy); results do not depend on the thread count.

struct Classification {
  std::string label;         // the head's answer (its out-of-scope label when routed out)
  float probability = 0;     // calibrated probability of the top label
  bool out_of_scope = false; // route(): the top probability was below the threshold
  std::vector<std::pair<std::string, float>> scores;  // every label, best first
};

struct RankedCandidate {
  int index = 0;      // position in the candidates given
  double score = 0;   // head: probability of the positive label; zero-shot: mean token log-probability
};

struct DeciderOptions {
  int threads = 0;        // 0 = all cores
  int max_tokens = 512;   // context for one input (or query + one candidate)
};

class Decider {
 public:
  static std::unique_ptr<Decider> create(std::shared_ptr<const SharedModel> model, const DeciderOptions& options = {});
  ~Decider();
  Decider(const Decider&) = delete;
  Decider& operator=(const Decider&) = delete;

  // Adds a head file (or "model.pq4#name"); returns its name. A head of the same name is replaced.
  std::string add_head(const std::string& path);
  std::vector<std::string> heads() const;
  std::vector<std::string> labels(const std::string& head) const;

  Classification classify(const std::string& head, const std::string& text);
  // classify, answering the head's out-of-scope label below the threshold
  // (the head's own, or `threshold` when >= 0).
  Classification route(const std::string& head, const std::string& text, float threshold = -1.0f);
  // Zero-shot: each label's verbalisation (" " + label) scored by mean
  // log-probability after `prompt_template` ({text} = the text).
  Classification classify_zero_shot(const std::string& text, const std::vector<std::string>& labels,
                                    const std::string& prompt_template = "{text}\nTopic:");
  // Best first. With a head (trained on query/candidate pairs): its positive
  // (last) label's probability; without: the candidate's mean token
  // log-probability after the query. The query's KV cache is computed once.
  std::vector<RankedCandidate> rank(const std::string& query, const std::vector<std::string>& candidates,
                                    const std::string& head = "");

 private:
  struct Impl;
  explicit Decider(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pocket
