// The public Engine facade over loader, Session and ChatSession.
#include "generate/chat_session.h"
#include "generate/session.h"
#include "pocket/pocket.h"
#include "runtime/loader.h"
#include "util/error.h"

namespace pocket {

struct Engine::Impl {
  LoadedModel model;
  EngineOptions options;
  std::unique_ptr<Session> session;
  std::unique_ptr<ChatSession> chat;

  void new_chat() {
    chat = std::make_unique<ChatSession>(*session, ChatTemplate(model.chat_format), options.system_prompt,
                                         options.enable_thinking);
  }
};

namespace {

GenerateOptions to_internal(const GenerationOptions& o) {
  GenerateOptions g;
  g.max_tokens = o.max_tokens;
  g.stop_strings = o.stop;
  g.stop_at_eos = !o.ignore_eos;
  g.sampling.temperature = o.temperature;
  g.sampling.top_k = o.top_k;
  g.sampling.top_p = o.top_p;
  g.sampling.min_p = o.min_p;
  g.sampling.repeat_penalty = o.repeat_penalty;
  g.sampling.repeat_last_n = o.repeat_last_n;
  g.sampling.seed = o.seed;
  g.sampling.validate();
  return g;
}

void fill(GenerationStats* s, const GenerateResult& r) {
  if (!s) return;
  s->prompt_tokens = r.prompt_tokens;
  s->reused_tokens = r.reused_tokens;
  s->generated_tokens = static_cast<int>(r.tokens.size());
  s->prefill_seconds = r.prefill_seconds;
  s->decode_seconds = r.decode_seconds;
  s->stop_reason = stop_reason_name(r.stop);
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::string& model_path, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  OpenOptions oo;
  oo.tokenizer_path = options.tokenizer_path;
  impl->model = load_model(model_path, oo);
  const ModelConfig& cfg = impl->model.model->config();
  const int ctx = resolve_context(options.context, cfg);
  const int threads = resolve_threads(options.threads);
  impl->session = std::make_unique<Session>(impl->model.model, impl->model.tokenizer, ctx, threads);
  impl->new_chat();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

std::string Engine::generate(const std::string& prompt, const GenerationOptions& options, const TextCallback& on_text,
                             GenerationStats* stats) {
  EncodeOptions eo;
  eo.add_bos = impl_->model.tokenizer->vocab().add_bos;
  auto ids = impl_->model.tokenizer->encode(prompt, eo);
  auto r = impl_->session->generate(ids, to_internal(options), on_text);
  fill(stats, r);
  return r.text;
}

std::string Engine::chat(const std::string& user_message, const GenerationOptions& options,
                         const TextCallback& on_text, GenerationStats* stats) {
  auto r = impl_->chat->send(user_message, to_internal(options), on_text);
  fill(stats, r);
  return r.text;
}

void Engine::reset() {
  impl_->session->reset();
  impl_->new_chat();
}

std::vector<int32_t> Engine::tokenize(std::string_view text, bool allow_special) const {
  EncodeOptions eo;
  eo.allow_special = allow_special;
  return impl_->model.tokenizer->encode(text, eo);
}

std::string Engine::detokenize(const std::vector<int32_t>& ids) const { return impl_->model.tokenizer->decode(ids); }

std::string Engine::architecture() const { return arch_name(impl_->model.model->config().arch); }
int Engine::context_size() const { return impl_->session->context_size(); }
int Engine::vocab_size() const { return impl_->model.model->config().vocab_size; }

}  // namespace pocket
