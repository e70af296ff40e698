// The public C++ facade: SharedModel (a loaded model, shared and immutable)
// and Engine (one conversation on it: Session + ChatSession, cancellation,
// the one-call-at-a-time guard).
#include <atomic>
#include <chrono>
#include <mutex>

#include "constrain/constraint.h"
#include "generate/chat_session.h"
#include "generate/session.h"
#include "generate/prefix_cache.h"
#include "kernels/kernels.h"
#include "pocket/pocket.h"
#include "runtime/loader.h"
#include "runtime/shared_model_impl.h"
#include "util/error.h"

namespace pocket {

SharedModel::SharedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharedModel::~SharedModel() = default;

std::shared_ptr<const SharedModel> SharedModel::open(const std::string& model_path, const ModelOptions& options) {
  return open(model_path, options, nullptr);
}

std::shared_ptr<const SharedModel> SharedModel::open(const std::string& model_path, const ModelOptions& options,
                                                     const MemoryRequest* budget) {
  auto impl = std::make_unique<Impl>();
  impl->path = model_path;
  impl->on_log = options.on_log;
  impl->log_level = options.log_level;
  OpenOptions oo;
  oo.tokenizer_path = options.tokenizer_path;
  const auto t0 = std::chrono::steady_clock::now();
  impl->model = load_model(model_path, oo, options.on_progress, budget);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::shared_ptr<const SharedModel> m(new SharedModel(std::move(impl)));
  const LoadedModel& lm = m->impl_->model;
  const ModelConfig& cfg = lm.model->config();
  m->log(LogLevel::Info, cat("loaded ", model_path, ": ", arch_name(cfg.arch), ", ", cfg.n_layers, " layers, vocabulary ",
                             cfg.vocab_size, ", context ", cfg.max_seq_len, ", ", chat_format_name(lm.chat_format),
                             " chat template, kernels ", kernels::active_isa(), ", ", static_cast<int>(ms + 0.5),
                             " ms"));
  if (!lm.chat_template_recognised)
    m->log(LogLevel::Warning, cat("the model's chat template is not one Pocket renders; chat uses ",
                                  chat_format_name(lm.chat_format)));
  return m;
}

void SharedModel::log(LogLevel level, std::string_view message) const {
  if (!impl_->on_log || level < impl_->log_level) return;
  std::lock_guard<std::mutex> lock(impl_->log_mu);
  impl_->on_log(level, message);
}

std::vector<int32_t> SharedModel::tokenize(std::string_view text, bool allow_special) const {
  EncodeOptions eo;
  eo.allow_special = allow_special;
  return impl_->model.tokenizer->encode(text, eo);
}

std::string SharedModel::detokenize(std::span<const int32_t> ids) const {
  return impl_->model.tokenizer->decode(std::vector<int32_t>(ids.begin(), ids.end()));
}

std::string SharedModel::architecture() const { return arch_name(impl_->model.model->config().arch); }
int SharedModel::context_length() const { return impl_->model.model->config().max_seq_len; }
int SharedModel::vocab_size() const { return impl_->model.model->config().vocab_size; }
int SharedModel::n_layers() const { return impl_->model.model->config().n_layers; }
const std::string& SharedModel::path() const { return impl_->path; }

struct Engine::Impl {
  std::shared_ptr<const SharedModel> shared;
  const LoadedModel* model = nullptr;  // shared's
  EngineOptions options;
  std::unique_ptr<Session> session;
  std::unique_ptr<ChatSession> chat;
  // Calls are numbered: call_ is odd while call number call_ runs (the
  // one-at-a-time guard), and cancel() records the number of the call it
  // stops, so a cancel that races with the end of a call can never reach
  // the next one.
  std::atomic<uint64_t> call{0};
  std::atomic<uint64_t> cancel{0};
  std::atomic<int> threads{0};  // the session's, readable from any thread
  KVType kv = KVType::F16;      // the session's KV cache type
  // The vocabulary as constraints see it, built at the first constrained call.
  std::shared_ptr<const constrain::VocabIndex> vocab_index;

  // Compiles options.constraint (if any) into g.
  void constrain(const GenerationOptions& options, GenerateOptions& g) {
    const auto& c = options.constraint;
    if (c.kind.empty()) return;
    using Kind = constrain::ConstraintSpec::Kind;
    constrain::ConstraintSpec spec;
    for (Kind k : {Kind::JsonSchema, Kind::Json, Kind::Regex, Kind::Choice, Kind::Grammar})
      if (c.kind == constrain::kind_name(k)) spec.kind = k;
    if (spec.kind == Kind::None)
      fail_as(ErrorCode::InvalidArgument, "constraint kind '", c.kind,
              "' is not one of json-schema, json, regex, choice, grammar");
    spec.text = c.text;
    spec.choices = c.choices;
    spec.json_max_ws = c.json_whitespace;
    spec.json_open = c.json_open;
    if (!vocab_index) vocab_index = constrain::VocabIndex::build(*model->tokenizer);
    g.constraint = constrain::compile_constraint(spec, vocab_index);
  }

  void new_chat() {
    chat = std::make_unique<ChatSession>(*session, ChatTemplate(model->chat_format), options.system_prompt,
                                         options.enable_thinking);
  }
};

namespace {

// Marks a call running on an engine for its lifetime; refuses a second one.
class CallScope {
 public:
  CallScope(std::atomic<uint64_t>& call, const char* what) : call_(call) {
    uint64_t c = call_.load();
    do {
      if (c & 1)
        fail_as(ErrorCode::Busy, what, ": the engine is busy (another thread is running a call on it; "
                "one engine runs one call at a time)");
    } while (!call_.compare_exchange_weak(c, c + 1));
    id_ = c + 1;
  }
  ~CallScope() { call_.store(id_ + 1); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  uint64_t id() const { return id_; }

 private:
  std::atomic<uint64_t>& call_;
  uint64_t id_ = 0;
};

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
  g.prefill_progress = o.on_prefill_progress;
  g.sampling.validate();
  if (o.max_tokens < 0) fail_as(ErrorCode::InvalidArgument, "max tokens ", o.max_tokens, " must be >= 0");
  return g;
}

void fill(GenerationStats* s, const GenerateResult& r, const Session& session) {
  if (!s) return;
  s->context_used = static_cast<int>(session.cached_tokens().size());
  s->prompt_tokens = r.prompt_tokens;
  s->reused_tokens = r.reused_tokens;
  s->generated_tokens = static_cast<int>(r.tokens.size());
  s->prefill_seconds = r.prefill_seconds;
  s->decode_seconds = r.decode_seconds;
  s->stop_reason = stop_reason_name(r.stop);
  s->constraint_complete = r.constraint_complete;
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

namespace {
MemoryRequest memory_request(const EngineOptions& o) {
  MemoryRequest r;
  r.budget_mb = o.mem_budget_mb;
  r.context = o.context;
  r.batch = o.batch;
  r.threads = resolve_threads(o.threads);
  r.kv = o.kv.empty() ? KVType::F16 : parse_kv_type(o.kv);
  r.choose_kv = o.kv.empty();
  return r;
}
}  // namespace

std::unique_ptr<Engine> Engine::open(const std::string& model_path, const EngineOptions& options) {
  ModelOptions mo;
  mo.tokenizer_path = options.tokenizer_path;
  if (options.mem_budget_mb < 0)
    fail_as(ErrorCode::InvalidArgument, "memory budget ", options.mem_budget_mb, " MiB must be >= 0 (0 = none)");
  const MemoryRequest budget = memory_request(options);
  return create(SharedModel::open(model_path, mo, options.mem_budget_mb > 0 ? &budget : nullptr), options);
}

std::unique_ptr<Engine> Engine::create(std::shared_ptr<const SharedModel> model, const EngineOptions& options) {
  if (!model) fail_as(ErrorCode::InvalidArgument, "Engine::create: no model (null pointer)");
  auto impl = std::make_unique<Impl>();
  impl->shared = std::move(model);
  impl->model = &impl->shared->impl_->model;
  impl->options = options;
  const ModelConfig& cfg = impl->model->model->config();
  int ctx = resolve_context(options.context, cfg);
  const int threads = resolve_threads(options.threads);
  if (options.mem_budget_mb < 0)
    fail_as(ErrorCode::InvalidArgument, "memory budget ", options.mem_budget_mb, " MiB must be >= 0 (0 = none)");
  KVType kv = memory_request(options).kv;
  if (options.mem_budget_mb > 0) {
    const MemoryPlan plan = plan_for(*impl->model->file, memory_request(options));
    ctx = plan.context;
    kv = plan.kv_type;
    impl->shared->log(LogLevel::Info, cat("memory plan: ", plan.describe(), plan.context_chosen ? " (context chosen)" : ""));
  }
  impl->session = std::make_unique<Session>(impl->model->model, impl->model->tokenizer, ctx, threads, options.batch, kv);
  impl->threads = threads;
  impl->kv = kv;
  impl->new_chat();
  impl->shared->log(LogLevel::Debug, cat("engine created: context ", ctx, " tokens, ", threads, " threads, ", kv_type_name(kv), " KV cache"));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

namespace {
GenerateOptions with_cancel(const GenerationOptions& options, const std::atomic<uint64_t>& cancel, uint64_t id) {
  GenerateOptions g = to_internal(options);
  g.cancelled = [&cancel, id] { return cancel.load(std::memory_order_relaxed) == id; };
  return g;
}
}  // namespace

std::string Engine::generate(const std::string& prompt, const GenerationOptions& options, const TextCallback& on_text,
                             GenerationStats* stats) {
  CallScope scope(impl_->call, "generate");
  GenerateOptions g = with_cancel(options, impl_->cancel, scope.id());
  impl_->constrain(options, g);
  EncodeOptions eo;
  eo.add_bos = impl_->model->tokenizer->vocab().add_bos;
  auto ids = impl_->model->tokenizer->encode(prompt, eo);
  auto r = impl_->session->generate(ids, g, on_text);
  fill(stats, r, *impl_->session);
  return r.text;
}

std::string Engine::chat(const std::string& user_message, const GenerationOptions& options,
                         const TextCallback& on_text, GenerationStats* stats) {
  CallScope scope(impl_->call, "chat");
  GenerateOptions g = with_cancel(options, impl_->cancel, scope.id());
  impl_->constrain(options, g);
  auto r = impl_->chat->send(user_message, g, on_text);
  fill(stats, r, *impl_->session);
  return r.text;
}

void Engine::reset() {
  CallScope scope(impl_->call, "reset");
  impl_->session->reset();
  impl_->new_chat();
}

void Engine::save_state(const std::string& path) {
  CallScope scope(impl_->call, "save_state");
  impl_->session->save_state(path, impl_->chat->tokens());
}

void Engine::load_state(const std::string& path) {
  CallScope scope(impl_->call, "load_state");
  auto conversation = impl_->session->load_state(path);
  impl_->new_chat();
  impl_->chat->resume(std::move(conversation));
}

int SharedPrefix::tokens() const { return static_cast<int>(cache_->tokens().size()); }
size_t SharedPrefix::bytes() const { return cache_->bytes(); }

std::shared_ptr<const SharedPrefix> Engine::share_chat_start() {
  CallScope scope(impl_->call, "share_chat_start");
  impl_->new_chat();
  if (impl_->chat->tokens().empty())
    fail_as(ErrorCode::InvalidArgument, "share_chat_start: the chat starts with no tokens (no system prompt, and "
            "the template adds nothing before the first user turn)");
  auto cache = std::make_shared<const PrefixCache>(*impl_->session, impl_->chat->tokens());
  return std::shared_ptr<const SharedPrefix>(new SharedPrefix(std::move(cache)));
}

void Engine::use_prefix(const SharedPrefix& prefix) {
  CallScope scope(impl_->call, "use_prefix");
  prefix.cache_->apply(*impl_->session);
  impl_->new_chat();
}

void Engine::cancel() {
  const uint64_t c = impl_->call.load();
  if (c & 1) impl_->cancel.store(c);
}

void Engine::set_threads(int threads) {
  CallScope scope(impl_->call, "set_threads");
  if (threads < 1) fail_as(ErrorCode::InvalidArgument, "thread count ", threads, " must be >= 1");
  impl_->session->set_threads(threads);
  impl_->threads = threads;
}

int Engine::threads() const { return impl_->threads.load(); }

std::vector<int32_t> Engine::tokenize(std::string_view text, bool allow_special) const {
  return impl_->shared->tokenize(text, allow_special);
}

std::string Engine::detokenize(const std::vector<int32_t>& ids) const { return impl_->shared->detokenize(ids); }

std::string Engine::architecture() const { return impl_->shared->architecture(); }
int Engine::context_size() const { return impl_->session->context_size(); }
std::string Engine::kv_cache_type() const { return kv_type_name(impl_->kv); }
int Engine::vocab_size() const { return impl_->shared->vocab_size(); }
const std::shared_ptr<const SharedModel>& Engine::model() const { return impl_->shared; }

}  // namespace pocket
