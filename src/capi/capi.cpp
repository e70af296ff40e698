// The C API (include/pocket/pocket_c.h): a thin layer over the C++ one
// (pocket::SharedModel, pocket::Engine). What this file owns:
//  - the handle registry: handles are numbers looked up under a lock on each
//    call (a closed or bogus handle is an error, not a use-after-free), each
//    entry holding a shared_ptr that a running call copies, so closing a
//    session another thread is using cancels that call and frees the
//    session when it returns;
//  - the boundary: every entry point is noexcept, catches everything and
//    turns it into a pocket_status plus the thread-local message (also passed
//    to the model's log callback);
//  - the extensible structs: reading a caller's options by its struct_size
//    (defaults for fields it does not cover, refusing unknown non-zero ones)
//    and writing only the result fields a caller's struct covers.
#define POCKET_C_BUILD 1
#include "pocket/pocket_c.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "pocket/pocket.h"

namespace {

using pocket::ErrorCode;

thread_local std::string t_last_error;

// ---- handles ----------------------------------------------------------------

struct ModelEntry {
  std::shared_ptr<const pocket::SharedModel> model;
  std::string architecture;  // pocket_model_info's string lives as long as the handle
};

struct SessionEntry {
  std::unique_ptr<pocket::Engine> engine;
  // Decision heads: created on first use, on the engine's model.
  std::mutex decider_mu;
  std::unique_ptr<pocket::Decider> decider;
  pocket::Decider& heads() {
    std::lock_guard<std::mutex> lock(decider_mu);
    if (!decider) {
      pocket::DeciderOptions o;
      o.threads = engine->threads();
      o.max_tokens = engine->context_size();
      decider = pocket::Decider::create(engine->model(), o);
    }
    return *decider;
  }
};

class Registry {
 public:
  uint64_t add_model(std::shared_ptr<ModelEntry> e) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = next_++;
    models_.emplace(id, std::move(e));
    return id;
  }
  uint64_t add_session(std::shared_ptr<SessionEntry> e) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = next_++;
    sessions_.emplace(id, std::move(e));
    return id;
  }
  std::shared_ptr<ModelEntry> model(uint64_t id, bool remove = false) { return find(models_, id, remove); }
  std::shared_ptr<SessionEntry> session(uint64_t id, bool remove = false) { return find(sessions_, id, remove); }
  bool is_model(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return models_.count(id) != 0;
  }
  bool is_session(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.count(id) != 0;
  }

 private:
  template <class Map>
  typename Map::mapped_type find(Map& map, uint64_t id, bool remove) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map.find(id);
    if (it == map.end()) return nullptr;
    auto found = it->second;
    if (remove) map.erase(it);
    return found;
  }

  std::mutex mu_;
  uint64_t next_ = 1;  // never reused, so a stale handle never names a newer object
  std::unordered_map<uint64_t, std::shared_ptr<ModelEntry>> models_;
  std::unordered_map<uint64_t, std::shared_ptr<SessionEntry>> sessions_;
};

// Never destroyed: handles an app leaves open at exit stay valid for threads
// still running then.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

uint64_t id_of(const void* handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }
template <class Handle>
Handle* handle_of(uint64_t id) {
  return reinterpret_cast<Handle*>(static_cast<uintptr_t>(id));
}

// ---- errors -----------------------------------------------------------------

// A failure to report: its status and message (thrown inside this file only,
// caught by guarded()).
struct CFailure {
  pocket_status status;
  std::string message;
};

[[noreturn]] void refuse(pocket_status status, std::string message) { throw CFailure{status, std::move(message)}; }

pocket_status status_of(ErrorCode code, pocket_status otherwise) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return POCKET_ERR_INVALID_ARGUMENT;
    case ErrorCode::ContextFull:
      return POCKET_ERR_CONTEXT_FULL;
    case ErrorCode::Cancelled:
      return POCKET_ERR_CANCELLED;
    case ErrorCode::Busy:
      return POCKET_ERR_BUSY;
    case ErrorCode::Failed:
      break;
  }
  return otherwise;
}

// Runs `body` (which returns nothing and throws on failure) and turns every
// exception into a status and this thread's message, prefixed with the
// function's name. `plain_failure` is the status of a pocket::Error without
// a more specific code (POCKET_ERR_MODEL while opening a model). The model
// in `*log_to` when the body fails (the body sets it once it knows the
// model) also receives the message, at error level.
template <class Body>
pocket_status guarded(const char* fn, pocket_status plain_failure, const pocket::SharedModel* const* log_to,
                      Body&& body) noexcept {
  pocket_status status = POCKET_OK;
  std::string message;
  try {
    body();
    return POCKET_OK;
  } catch (const CFailure& f) {
    status = f.status;
    message = f.message;
  } catch (const pocket::Error& e) {
    status = status_of(e.code(), plain_failure);
    message = e.what();
  } catch (const std::bad_alloc&) {
    status = POCKET_ERR_OUT_OF_MEMORY;
    message = "out of memory";
  } catch (const std::exception& e) {
    status = POCKET_ERR_INTERNAL;
    message = std::string("internal error: ") + e.what();
  } catch (...) {
    status = POCKET_ERR_INTERNAL;
    message = "internal error: an unknown exception";
  }
  try {
    t_last_error = std::string(fn) + ": " + message;
    if (log_to && *log_to) (*log_to)->log(pocket::LogLevel::Error, t_last_error);
  } catch (...) {
    // Out of memory for the message itself: the status still says what happened.
  }
  return status;
}

std::shared_ptr<ModelEntry> need_model(const void* handle, bool remove = false) {
  const char* what = "model";
  if (handle == nullptr) refuse(POCKET_ERR_INVALID_HANDLE, std::string("the ") + what + " handle is NULL");
  auto e = registry().model(id_of(handle), remove);
  if (!e) {
    if (registry().is_session(id_of(handle)))
      refuse(POCKET_ERR_INVALID_HANDLE,
             std::string("the ") + what + " handle is a session handle, not a model handle");
    refuse(POCKET_ERR_INVALID_HANDLE,
           std::string("the ") + what + " handle is not an open model (closed already, or never opened)");
  }
  return e;
}

std::shared_ptr<SessionEntry> need_session(const void* handle, bool remove = false) {
  if (handle == nullptr) refuse(POCKET_ERR_INVALID_HANDLE, "the session handle is NULL");
  auto e = registry().session(id_of(handle), remove);
  if (!e) {
    if (registry().is_model(id_of(handle)))
      refuse(POCKET_ERR_INVALID_HANDLE, "the session handle is a model handle, not a session handle");
    refuse(POCKET_ERR_INVALID_HANDLE, "the session handle is not an open session (closed already, or never opened)");
  }
  return e;
}

template <class T>
void need_out(T* p, const char* name) {
  if (p == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

// ---- extensible structs -----------------------------------------------------

// Every size this library has shipped for T, oldest first: fields are only
// appended, and each release that appends adds the new sizeof here (an app
// built against an older header sends an older size and keeps working).
template <class T>
struct ShippedSizes {
  static constexpr size_t sizes[] = {sizeof(T)};
};
template <>
struct ShippedSizes<pocket_generate_options> {  // + structured output (constraint_*), + json_open
  static constexpr size_t sizes[] = {offsetof(pocket_generate_options, constraint_kind),
                                     offsetof(pocket_generate_options, json_open), sizeof(pocket_generate_options)};
};
template <>
struct ShippedSizes<pocket_session_options> {  // + memory budget (mem_budget_mb, batch), + kv_cache
  static constexpr size_t sizes[] = {offsetof(pocket_session_options, mem_budget_mb),
                                     offsetof(pocket_session_options, kv_cache), sizeof(pocket_session_options)};
};
template <>
struct ShippedSizes<pocket_stats> {  // + constraint_complete
  static constexpr size_t sizes[] = {offsetof(pocket_stats, constraint_complete), sizeof(pocket_stats)};
};

template <class T>
std::string shipped_sizes_text() {
  std::string s;
  for (size_t n : ShippedSizes<T>::sizes) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s;
}

// Refuses a struct_size below every version, or between two versions (not
// the size of any header's struct: a caller that set it by hand wrongly).
template <class T>
void check_struct_size(size_t n, const char* type, bool options) {
  constexpr auto& sizes = ShippedSizes<T>::sizes;
  const std::string how = options ? std::string(" (set it with ") + type + "_init or to sizeof(" + type + "))"
                                  : std::string(" (set it to sizeof(") + type + "))";
  if (n < sizes[0])
    refuse(POCKET_ERR_INVALID_ARGUMENT,
           std::string(type) + ".struct_size is " + std::to_string(n) + ", smaller than any version of the struct" + how);
  if (n < sizeof(T) && std::find(std::begin(sizes), std::end(sizes), n) == std::end(sizes))
    refuse(POCKET_ERR_INVALID_ARGUMENT, std::string(type) + ".struct_size is " + std::to_string(n) +
                                            ", not the size of any version of the struct (" + shipped_sizes_text<T>() +
                                            " bytes)" + how);
}

// The caller's `in` (struct_size bytes) over `out` (holding the defaults):
// an older, smaller struct leaves the fields it lacks at their defaults.
template <class T>
void read_struct(const T* in, T& out, const char* type) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (in == nullptr) return;
  const size_t n = in->struct_size;
  check_struct_size<T>(n, type, true);
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < n; ++i)
    if (bytes[i] != 0)
      refuse(POCKET_ERR_UNSUPPORTED, std::string(type) + " sets a field this library version (" + POCKET_VERSION +
                                         ") does not know: byte " + std::to_string(i) + " of " + std::to_string(n) +
                                         " is not zero, and this library's " + type + " has " +
                                         std::to_string(sizeof(T)) + " bytes");
  std::memcpy(&out, in, std::min(n, sizeof(T)));
  out.struct_size = sizeof(T);
}

// Checks a caller's result struct before the work is done.
template <class T>
void check_result_struct(const T* out, const char* type) {
  if (out == nullptr) return;
  check_struct_size<T>(out->struct_size, type, false);
}

// Writes `value` over the part of `out` that both this library and the
// caller's struct know; bytes beyond (fields of a newer header) are left as
// the caller set them, and an older caller's struct is not written past its end.
template <class T>
void write_struct(T* out, T value) {
  if (out == nullptr) return;
  const uint32_t caller_size = out->struct_size;
  value.struct_size = caller_size;
  std::memcpy(out, &value, std::min<size_t>(caller_size, sizeof(T)));
}

pocket::LogLevel log_level_of(int32_t level) {
  if (level < POCKET_LOG_DEBUG || level > POCKET_LOG_ERROR)
    refuse(POCKET_ERR_INVALID_ARGUMENT, "log_level " + std::to_string(level) + " is not a pocket_log_level (0-3)");
  return static_cast<pocket::LogLevel>(level);
}

pocket::GenerationOptions generation_options(const pocket_generate_options* in) {
  pocket_generate_options o;
  pocket_generate_options_init(&o);
  read_struct(in, o, "pocket_generate_options");
  pocket::GenerationOptions g;
  g.max_tokens = o.max_tokens;
  g.temperature = o.temperature;
  g.top_k = o.top_k;
  g.top_p = o.top_p;
  g.min_p = o.min_p;
  g.repeat_penalty = o.repeat_penalty;
  g.repeat_last_n = o.repeat_last_n;
  g.seed = o.seed;
  g.ignore_eos = o.ignore_eos != 0;
  if (o.on_prefill_progress) {
    auto fn = o.on_prefill_progress;
    void* ud = o.prefill_user_data;
    g.on_prefill_progress = [fn, ud](float p) { return fn(p, ud) == 0; };
  }
  if (o.n_stop > 0 && o.stop == nullptr)
    refuse(POCKET_ERR_INVALID_ARGUMENT,
           "pocket_generate_options.stop is NULL but n_stop is " + std::to_string(o.n_stop));
  for (uint32_t i = 0; i < o.n_stop; ++i) {
    if (o.stop[i] == nullptr)
      refuse(POCKET_ERR_INVALID_ARGUMENT, "pocket_generate_options.stop[" + std::to_string(i) + "] is NULL");
    g.stop.emplace_back(o.stop[i]);
  }
  if (o.constraint_kind != nullptr && *o.constraint_kind) {
    g.constraint.kind = o.constraint_kind;
    if (o.constraint_text != nullptr) g.constraint.text = o.constraint_text;
    if (o.n_choices > 0 && o.choices == nullptr)
      refuse(POCKET_ERR_INVALID_ARGUMENT, "pocket_generate_options.choices is NULL but n_choices is " + std::to_string(o.n_choices));
    for (uint32_t i = 0; i < o.n_choices; ++i) {
      if (o.choices[i] == nullptr)
        refuse(POCKET_ERR_INVALID_ARGUMENT, "pocket_generate_options.choices[" + std::to_string(i) + "] is NULL");
      g.constraint.choices.emplace_back(o.choices[i]);
    }
    g.constraint.json_whitespace = o.json_whitespace;
    g.constraint.json_open = o.json_open != 0;
  }
  return g;
}

int32_t stop_reason_of(const std::string& name) {
  for (int r = POCKET_STOP_EOS; r <= POCKET_STOP_CONSTRAINT; ++r)
    if (name == pocket_stop_reason_name(r)) return r;
  return POCKET_STOP_NONE;
}

// generate and chat: the same arguments, the same handling.
template <class Call>
pocket_status run_generation(const char* fn, pocket_session* session, const char* text,
                             const pocket_generate_options* options, pocket_text_fn on_text, void* user_data,
                             pocket_stats* stats, Call&& call) noexcept {
  std::shared_ptr<SessionEntry> entry;
  const pocket::SharedModel* model = nullptr;
  if (stats != nullptr && stats->struct_size >= ShippedSizes<pocket_stats>::sizes[0]) {
    pocket_stats zero{};
    write_struct(stats, zero);
  }
  return guarded(fn, POCKET_ERR_FAILED, &model, [&] {
    entry = need_session(session);
    model = entry->engine->model().get();
    if (text == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the text is NULL");
    check_result_struct(stats, "pocket_stats");
    pocket::GenerationOptions g = generation_options(options);
    pocket::TextCallback cb;
    std::string piece_copy;
    if (on_text)
      cb = [&](std::string_view piece) {
        piece_copy.assign(piece);  // NUL-terminated for the caller
        return on_text(piece_copy.c_str(), piece_copy.size(), user_data) == 0;
      };
    pocket::GenerationStats s;
    call(*entry->engine, std::string(text), g, cb, &s);
    pocket_stats out{};
    out.prompt_tokens = s.prompt_tokens;
    out.reused_tokens = s.reused_tokens;
    out.generated_tokens = s.generated_tokens;
    out.stop_reason = stop_reason_of(s.stop_reason);
    out.context_used = s.context_used;
    out.prefill_seconds = s.prefill_seconds;
    out.decode_seconds = s.decode_seconds;
    out.constraint_complete = s.constraint_complete ? 1 : 0;
    write_struct(stats, out);
  });
}

// The session behind a handle, with its model as the place to log failures.
std::shared_ptr<SessionEntry> session_for_call(const void* handle, const pocket::SharedModel*& log_to) {
  auto entry = need_session(handle);
  log_to = entry->engine->model().get();
  return entry;
}

}  // namespace

// ---- entry points -------------------------------------------------------------

extern "C" {

const char* pocket_last_error(void) { return t_last_error.c_str(); }

const char* pocket_status_name(int status) {
  switch (status) {
    case POCKET_OK:
      return "POCKET_OK";
    case POCKET_ERR_INVALID_ARGUMENT:
      return "POCKET_ERR_INVALID_ARGUMENT";
    case POCKET_ERR_INVALID_HANDLE:
      return "POCKET_ERR_INVALID_HANDLE";
    case POCKET_ERR_MODEL:
      return "POCKET_ERR_MODEL";
    case POCKET_ERR_CONTEXT_FULL:
      return "POCKET_ERR_CONTEXT_FULL";
    case POCKET_ERR_CANCELLED:
      return "POCKET_ERR_CANCELLED";
    case POCKET_ERR_BUSY:
      return "POCKET_ERR_BUSY";
    case POCKET_ERR_BUFFER_TOO_SMALL:
      return "POCKET_ERR_BUFFER_TOO_SMALL";
    case POCKET_ERR_OUT_OF_MEMORY:
      return "POCKET_ERR_OUT_OF_MEMORY";
    case POCKET_ERR_UNSUPPORTED:
      return "POCKET_ERR_UNSUPPORTED";
    case POCKET_ERR_FAILED:
      return "POCKET_ERR_FAILED";
    case POCKET_ERR_INTERNAL:
      return "POCKET_ERR_INTERNAL";
  }
  return "unknown status";
}

const char* pocket_version(void) { return POCKET_VERSION; }
int pocket_abi_version(void) { return POCKET_ABI_VERSION; }

const char* pocket_stop_reason_name(int reason) {
  switch (reason) {
    case POCKET_STOP_EOS:
      return "eos";
    case POCKET_STOP_STOP_STRING:
      return "stop string";
    case POCKET_STOP_MAX_TOKENS:
      return "max tokens";
    case POCKET_STOP_CONTEXT_FULL:
      return "context full";
    case POCKET_STOP_CALLBACK:
      return "stopped by caller";
    case POCKET_STOP_CANCELLED:
      return "cancelled";
    case POCKET_STOP_CONSTRAINT:
      return "constraint complete";
  }
  return "none";
}

void pocket_model_options_init(pocket_model_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->log_level = POCKET_LOG_INFO;
}

void pocket_session_options_init(pocket_session_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->enable_thinking = 1;
}

void pocket_generate_options_init(pocket_generate_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  const pocket::GenerationOptions d;  // the C++ API's defaults are the one source
  o->struct_size = sizeof(*o);
  o->max_tokens = d.max_tokens;
  o->temperature = d.temperature;
  o->top_k = d.top_k;
  o->top_p = d.top_p;
  o->min_p = d.min_p;
  o->repeat_penalty = d.repeat_penalty;
  o->repeat_last_n = d.repeat_last_n;
  o->seed = d.seed;
  o->ignore_eos = d.ignore_eos ? 1 : 0;
}

pocket_status pocket_model_open(const char* path, const pocket_model_options* options, pocket_model** model) {
  if (model != nullptr) *model = nullptr;
  return guarded("pocket_model_open", POCKET_ERR_MODEL, nullptr, [&] {
    need_out(model, "the model output pointer");
    if (path == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the model path is NULL");
    pocket_model_options o;
    pocket_model_options_init(&o);
    read_struct(options, o, "pocket_model_options");
    pocket::ModelOptions mo;
    if (o.tokenizer_path) mo.tokenizer_path = o.tokenizer_path;
    mo.log_level = log_level_of(o.log_level);
    if (o.on_progress) {
      auto fn = o.on_progress;
      void* ud = o.progress_user_data;
      mo.on_progress = [fn, ud](float p) { return fn(p, ud) == 0; };
    }
    if (o.on_log) {
      auto fn = o.on_log;
      void* ud = o.log_user_data;
      mo.on_log = [fn, ud](pocket::LogLevel level, std::string_view message) {
        const std::string text(message);
        fn(static_cast<int>(level), text.c_str(), ud);
      };
    }
    std::shared_ptr<const pocket::SharedModel> shared;
    try {
      shared = pocket::SharedModel::open(path, mo);
    } catch (const pocket::Error& e) {
      // The log callback hears why the model did not open, too.
      if (mo.on_log && mo.log_level <= pocket::LogLevel::Error)
        mo.on_log(pocket::LogLevel::Error, std::string("pocket_model_open: ") + e.what());
      throw;
    }
    auto entry = std::make_shared<ModelEntry>();
    entry->architecture = shared->architecture();
    entry->model = std::move(shared);
    *model = handle_of<pocket_model>(registry().add_model(std::move(entry)));
  });
}

pocket_status pocket_model_close(pocket_model* model) {
  return guarded("pocket_model_close", POCKET_ERR_FAILED, nullptr, [&] {
    need_model(model, /*remove=*/true);
    // Sessions on the model keep its weights until they close.
  });
}

pocket_status pocket_model_get_info(const pocket_model* model, pocket_model_info* info) {
  return guarded("pocket_model_get_info", POCKET_ERR_FAILED, nullptr, [&] {
    auto entry = need_model(model);
    need_out(info, "the info pointer");
    check_result_struct(info, "pocket_model_info");
    pocket_model_info out{};
    out.vocab_size = entry->model->vocab_size();
    out.context_length = entry->model->context_length();
    out.n_layers = entry->model->n_layers();
    out.architecture = entry->architecture.c_str();
    write_struct(info, out);
  });
}

pocket_status pocket_tokenize(const pocket_model* model, const char* text, size_t text_length, int allow_special,
                              int32_t* ids, size_t capacity, size_t* n_ids) {
  if (n_ids != nullptr) *n_ids = 0;
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_tokenize", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = need_model(model);
    log_to = entry->model.get();
    need_out(n_ids, "n_ids");
    if (text == nullptr && text_length > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "the text is NULL");
    if (ids == nullptr && capacity > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "ids is NULL but capacity is not 0");
    auto tokens = entry->model->tokenize(std::string_view(text ? text : "", text_length), allow_special != 0);
    *n_ids = tokens.size();
    if (tokens.size() > capacity)
      refuse(POCKET_ERR_BUFFER_TOO_SMALL, "the text has " + std::to_string(tokens.size()) +
                                              " tokens but the buffer holds " + std::to_string(capacity));
    std::copy(tokens.begin(), tokens.end(), ids);
  });
}

pocket_status pocket_detokenize(const pocket_model* model, const int32_t* ids, size_t n_ids, char* text,
                                size_t capacity, size_t* length) {
  if (length != nullptr) *length = 0;
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_detokenize", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = need_model(model);
    log_to = entry->model.get();
    need_out(length, "length");
    if (ids == nullptr && n_ids > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "ids is NULL but n_ids is not 0");
    if (text == nullptr && capacity > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "text is NULL but capacity is not 0");
    const std::string s = entry->model->detokenize(std::span<const int32_t>(ids, n_ids));
    *length = s.size();
    if (s.size() + 1 > capacity)
      refuse(POCKET_ERR_BUFFER_TOO_SMALL, "the text has " + std::to_string(s.size()) +
                                              " bytes (+1 for the NUL) but the buffer holds " +
                                              std::to_string(capacity));
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
  });
}

pocket_status pocket_session_open(pocket_model* model, const pocket_session_options* options,
                                  pocket_session** session) {
  if (session != nullptr) *session = nullptr;
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_open", POCKET_ERR_FAILED, &log_to, [&] {
    need_out(session, "the session output pointer");
    auto entry = need_model(model);
    log_to = entry->model.get();
    pocket_session_options o;
    pocket_session_options_init(&o);
    read_struct(options, o, "pocket_session_options");
    pocket::EngineOptions eo;
    eo.threads = o.threads;
    eo.context = o.context;
    if (o.system_prompt) eo.system_prompt = o.system_prompt;
    eo.enable_thinking = o.enable_thinking != 0;
    eo.mem_budget_mb = o.mem_budget_mb;
    eo.batch = o.batch;
    if (o.kv_cache) eo.kv = o.kv_cache;
    auto s = std::make_shared<SessionEntry>();
    s->engine = pocket::Engine::create(entry->model, eo);
    *session = handle_of<pocket_session>(registry().add_session(std::move(s)));
  });
}

pocket_status pocket_session_close(pocket_session* session) {
  return guarded("pocket_session_close", POCKET_ERR_FAILED, nullptr, [&] {
    auto entry = need_session(session, /*remove=*/true);
    // A call another thread is running returns within a step; it holds its
    // own reference, and the last one frees the session.
    entry->engine->cancel();
  });
}

pocket_status pocket_session_generate(pocket_session* session, const char* prompt,
                                      const pocket_generate_options* options, pocket_text_fn on_text,
                                      void* user_data, pocket_stats* stats) {
  return run_generation("pocket_session_generate", session, prompt, options, on_text, user_data, stats,
                        [](pocket::Engine& e, const std::string& text, const pocket::GenerationOptions& g,
                           const pocket::TextCallback& cb, pocket::GenerationStats* s) { e.generate(text, g, cb, s); });
}

pocket_status pocket_session_chat(pocket_session* session, const char* message,
                                  const pocket_generate_options* options, pocket_text_fn on_text, void* user_data,
                                  pocket_stats* stats) {
  return run_generation("pocket_session_chat", session, message, options, on_text, user_data, stats,
                        [](pocket::Engine& e, const std::string& text, const pocket::GenerationOptions& g,
                           const pocket::TextCallback& cb, pocket::GenerationStats* s) { e.chat(text, g, cb, s); });
}

pocket_status pocket_session_reset(pocket_session* session) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_reset", POCKET_ERR_FAILED, &log_to,
                 [&] { session_for_call(session, log_to)->engine->reset(); });
}

pocket_status pocket_session_save_state(pocket_session* session, const char* path) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_save_state", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = session_for_call(session, log_to);
    if (path == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the state path is NULL");
    entry->engine->save_state(path);
  });
}

pocket_status pocket_session_load_state(pocket_session* session, const char* path) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_load_state", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = session_for_call(session, log_to);
    if (path == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the state path is NULL");
    entry->engine->load_state(path);
  });
}

pocket_status pocket_session_share_chat_start(pocket_session* source, pocket_session* const* targets,
                                              size_t n_targets) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_share_chat_start", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = session_for_call(source, log_to);
    if (targets == nullptr && n_targets > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "the target list is NULL");
    std::vector<std::shared_ptr<SessionEntry>> to;
    for (size_t i = 0; i < n_targets; ++i) to.push_back(need_session(targets[i]));
    auto prefix = entry->engine->share_chat_start();
    for (const auto& t : to) t->engine->use_prefix(*prefix);
  });
}

pocket_status pocket_session_cancel(pocket_session* session) {
  return guarded("pocket_session_cancel", POCKET_ERR_FAILED, nullptr,
                 [&] { need_session(session)->engine->cancel(); });
}

pocket_status pocket_session_set_threads(pocket_session* session, int32_t threads) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_set_threads", POCKET_ERR_FAILED, &log_to,
                 [&] { session_for_call(session, log_to)->engine->set_threads(threads); });
}

pocket_status pocket_session_get_threads(const pocket_session* session, int32_t* threads) {
  return guarded("pocket_session_get_threads", POCKET_ERR_FAILED, nullptr, [&] {
    auto entry = need_session(session);
    need_out(threads, "threads");
    *threads = entry->engine->threads();
  });
}

pocket_status pocket_session_get_context_size(const pocket_session* session, int32_t* context_size) {
  return guarded("pocket_session_get_context_size", POCKET_ERR_FAILED, nullptr, [&] {
    auto entry = need_session(session);
    need_out(context_size, "context_size");
    *context_size = entry->engine->context_size();
  });
}

pocket_status pocket_session_get_kv_cache(const pocket_session* session, const char** kv_cache) {
  return guarded("pocket_session_get_kv_cache", POCKET_ERR_FAILED, nullptr, [&] {
    auto entry = need_session(session);
    need_out(kv_cache, "kv_cache");
    const std::string kv = entry->engine->kv_cache_type();
    *kv_cache = kv == "q8" ? "q8" : kv == "q4" ? "q4" : "f16";
  });
}

pocket_status pocket_session_add_head(pocket_session* session, const char* path) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_add_head", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = need_session(session);
    log_to = entry->engine->model().get();
    if (path == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the head path is NULL");
    entry->heads().add_head(path);
  });
}

pocket_status pocket_session_classify(pocket_session* session, const char* head, const char* text, int route,
                                      pocket_classification* result, char* label, size_t capacity,
                                      size_t* label_length) {
  if (label_length != nullptr) *label_length = 0;
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_classify", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = need_session(session);
    log_to = entry->engine->model().get();
    if (head == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the head name is NULL");
    if (text == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the text is NULL");
    need_out(label_length, "label_length");
    if (label == nullptr && capacity > 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "label is NULL but capacity is not 0");
    check_result_struct(result, "pocket_classification");
    pocket::Decider& d = entry->heads();
    const pocket::Classification c = route ? d.route(head, text) : d.classify(head, text);
    const std::vector<std::string> labels = d.labels(head);
    pocket_classification r{};
    r.struct_size = sizeof(r);
    r.label_index = c.out_of_scope ? -1 : static_cast<int32_t>(std::find(labels.begin(), labels.end(), c.label) - labels.begin());
    r.probability = c.probability;
    r.out_of_scope = c.out_of_scope ? 1 : 0;
    write_struct(result, r);
    *label_length = c.label.size();
    if (c.label.size() + 1 > capacity)
      refuse(POCKET_ERR_BUFFER_TOO_SMALL, "the label has " + std::to_string(c.label.size()) +
                                              " bytes (+1 for the NUL) but the buffer holds " + std::to_string(capacity));
    std::memcpy(label, c.label.data(), c.label.size());
    label[c.label.size()] = '\0';
  });
}

pocket_status pocket_session_rank(pocket_session* session, const char* head, const char* query,
                                  const char* const* candidates, size_t n, int32_t* order, double* scores) {
  const pocket::SharedModel* log_to = nullptr;
  return guarded("pocket_session_rank", POCKET_ERR_FAILED, &log_to, [&] {
    auto entry = need_session(session);
    log_to = entry->engine->model().get();
    if (query == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "the query is NULL");
    if (n == 0) refuse(POCKET_ERR_INVALID_ARGUMENT, "no candidates (n is 0)");
    if (candidates == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "candidates is NULL");
    need_out(order, "order");
    if (n > (size_t{1} << 20)) refuse(POCKET_ERR_INVALID_ARGUMENT, "n = " + std::to_string(n) + " candidates is too many");
    std::vector<std::string> c;
    for (size_t i = 0; i < n; ++i) {
      if (candidates[i] == nullptr) refuse(POCKET_ERR_INVALID_ARGUMENT, "candidates[" + std::to_string(i) + "] is NULL");
      c.emplace_back(candidates[i]);
    }
    const std::vector<pocket::RankedCandidate> r = entry->heads().rank(query, c, head ? head : "");
    for (size_t i = 0; i < r.size(); ++i) {
      order[i] = r[i].index;
      if (scores) scores[i] = r[i].score;
    }
  });
}

}  // extern "C"
