// pocket._core: the Python package's native layer, one function per call of
// Pocket's C API (include/pocket/pocket_c.h) and nothing more; the Pythonic
// classes are in pocket/__init__.py. What this file owns:
//  - handles travel to Python as integers and back unchanged (the C API checks
//    them, so a stale one is an error, never a crash);
//  - every call that computes (open, tokenize, generate, ...) runs with the GIL
//    released; a streaming callback takes it back for the Python call;
//  - a failed call raises the pocket.Error subclass for its status
//    (pocket/_errors.py) with pocket_last_error()'s message, and an exception
//    raised by a Python callback stops the call and reaches the caller as it is.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <pocket/pocket_c.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

// Raises the pocket.Error subclass of `status` with this thread's message
// (read right after the failed call, on the thread that made it).
[[noreturn]] void raise_status(int status) {
  const std::string message = pocket_last_error();
  nb::object error = nb::module_::import_("pocket._errors").attr("from_status")(status, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw nb::python_error();
}

void check(pocket_status status) {
  if (status != POCKET_OK) raise_status(status);
}

pocket_model* as_model(uintptr_t h) { return reinterpret_cast<pocket_model*>(h); }
pocket_session* as_session(uintptr_t h) { return reinterpret_cast<pocket_session*>(h); }

// A Python callable called from a C callback: takes the GIL, keeps the first
// exception raised and tells the C call to stop. `text` collects the pieces
// (without the GIL) for generate's return value.
struct PyCallback {
  nb::object fn;
  std::optional<nb::python_error> error;
  std::string text;

  bool call_with(const nb::handle& arg) {  // false: stop
    nb::gil_scoped_acquire gil;
    if (error) return false;
    try {
      nb::object r = fn(arg);
      return r.ptr() != Py_False;
    } catch (nb::python_error& e) {
      error.emplace(std::move(e));
      return false;
    }
  }
  void rethrow() {
    if (error) {
      nb::python_error e = std::move(*error);
      error.reset();
      throw e;
    }
  }
};

int on_text(const char* piece, size_t length, void* user_data) {
  auto* cb = static_cast<PyCallback*>(user_data);
  cb->text.append(piece, length);
  if (cb->fn.is_none()) return 0;  // no Python code runs during the call: the GIL stays free
  nb::gil_scoped_acquire gil;      // nb::str below needs it too
  nb::str text(piece, length);
  return cb->call_with(text) ? 0 : 1;
}

int on_progress(float progress, void* user_data) {
  auto* cb = static_cast<PyCallback*>(user_data);
  nb::gil_scoped_acquire gil;
  return cb->call_with(nb::float_(progress)) ? 0 : 1;
}

// The model's log callback: `user_data` is the Python callable, borrowed; the
// caller (pocket.Model, referenced by each of its sessions) keeps it alive
// as long as the model or any session on it can log. An exception it raises
// is reported as unraisable (logging must not change what a call does).
void on_log(int level, const char* message, void* user_data) {
  nb::gil_scoped_acquire gil;
  try {
    nb::handle(static_cast<PyObject*>(user_data))(level, nb::str(message));
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("pocket: the on_log callback");
  }
}

uintptr_t model_open(const std::string& path, std::optional<std::string> tokenizer, nb::object progress,
                     nb::object log, int32_t log_level) {
  pocket_model_options opt;
  pocket_model_options_init(&opt);
  opt.tokenizer_path = tokenizer ? tokenizer->c_str() : nullptr;
  opt.log_level = log_level;
  if (!log.is_none()) {
    opt.on_log = on_log;
    opt.log_user_data = log.ptr();
  }
  PyCallback cb{progress, {}, {}};
  if (!progress.is_none()) {
    opt.on_progress = on_progress;
    opt.progress_user_data = &cb;
  }
  pocket_model* model = nullptr;
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = pocket_model_open(path.c_str(), &opt, &model);
  }
  cb.rethrow();
  check(st);
  return reinterpret_cast<uintptr_t>(model);
}

nb::tuple model_info(uintptr_t model) {
  pocket_model_info info{};
  info.struct_size = sizeof info;
  check(pocket_model_get_info(as_model(model), &info));
  return nb::make_tuple(info.vocab_size, info.context_length, info.n_layers, nb::str(info.architecture));
}

std::vector<int32_t> tokenize(uintptr_t model, const std::string& text, bool special) {
  std::vector<int32_t> ids(text.size() + 8);
  size_t n = 0;
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = pocket_tokenize(as_model(model), text.data(), text.size(), special, ids.data(), ids.size(), &n);
    if (st == POCKET_ERR_BUFFER_TOO_SMALL) {
      ids.resize(n);
      st = pocket_tokenize(as_model(model), text.data(), text.size(), special, ids.data(), ids.size(), &n);
    }
  }
  check(st);
  ids.resize(n);
  return ids;
}

// Bytes: ids that end inside a UTF-8 character give text that is not valid
// UTF-8; the Python side decodes it with errors="replace".
nb::bytes detokenize(uintptr_t model, const std::vector<int32_t>& ids) {
  std::string text(ids.size() * 8 + 16, '\0');
  size_t n = 0;
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = pocket_detokenize(as_model(model), ids.data(), ids.size(), text.data(), text.size(), &n);
    if (st == POCKET_ERR_BUFFER_TOO_SMALL) {
      text.resize(n + 1);
      st = pocket_detokenize(as_model(model), ids.data(), ids.size(), text.data(), text.size(), &n);
    }
  }
  check(st);
  return nb::bytes(text.data(), n);
}

uintptr_t session_open(uintptr_t model, int32_t threads, int32_t context, bool thinking,
                       std::optional<std::string> system_prompt, int32_t mem_budget_mb, int32_t batch,
                       std::optional<std::string> kv_cache) {
  pocket_session_options opt;
  pocket_session_options_init(&opt);
  opt.threads = threads;
  opt.context = context;
  opt.mem_budget_mb = mem_budget_mb;
  opt.batch = batch;
  opt.enable_thinking = thinking ? 1 : 0;
  opt.system_prompt = system_prompt ? system_prompt->c_str() : nullptr;
  opt.kv_cache = kv_cache ? kv_cache->c_str() : nullptr;
  pocket_session* session = nullptr;
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = pocket_session_open(as_model(model), &opt, &session);
  }
  check(st);
  return reinterpret_cast<uintptr_t>(session);
}

// Session calls that may wait for a running call (close) or compute (reset).
template <pocket_status (*Fn)(pocket_session*)>
void session_call(uintptr_t session) {
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = Fn(as_session(session));
  }
  check(st);
}

// Saved sessions: pocket_session_save_state / load_state.
template <pocket_status (*Fn)(pocket_session*, const char*)>
void session_path_call(uintptr_t session, const std::string& path) {
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = Fn(as_session(session), path.c_str());
  }
  check(st);
}

void share_chat_start(uintptr_t source, const std::vector<uintptr_t>& targets) {
  std::vector<pocket_session*> t;
  for (uintptr_t h : targets) t.push_back(as_session(h));
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = pocket_session_share_chat_start(as_session(source), t.data(), t.size());
  }
  check(st);
}

int32_t get_threads(uintptr_t session) {
  int32_t n = 0;
  check(pocket_session_get_threads(as_session(session), &n));
  return n;
}

int32_t context_size(uintptr_t session) {
  int32_t n = 0;
  check(pocket_session_get_context_size(as_session(session), &n));
  return n;
}

std::string kv_cache(uintptr_t session) {
  const char* kv = nullptr;
  check(pocket_session_get_kv_cache(as_session(session), &kv));
  return kv;
}

// generate/chat: options left None take the library's defaults
// (pocket_generate_options_init); `on_piece` (or None) hears each piece.
// Returns (text, stats) with stats a tuple: prompt, reused, generated tokens,
// stop reason, context used, prefill s, decode s.
nb::tuple generate(uintptr_t session, bool chat, const std::string& text, std::optional<int32_t> max_tokens,
                   std::optional<float> temperature, std::optional<int32_t> top_k, std::optional<float> top_p,
                   std::optional<float> min_p, std::optional<float> repeat_penalty,
                   std::optional<int32_t> repeat_last_n, std::optional<uint64_t> seed, bool ignore_eos,
                   const std::vector<std::string>& stop, nb::object on_piece) {
  pocket_generate_options opt;
  pocket_generate_options_init(&opt);
  if (max_tokens) opt.max_tokens = *max_tokens;
  if (temperature) opt.temperature = *temperature;
  if (top_k) opt.top_k = *top_k;
  if (top_p) opt.top_p = *top_p;
  if (min_p) opt.min_p = *min_p;
  if (repeat_penalty) opt.repeat_penalty = *repeat_penalty;
  if (repeat_last_n) opt.repeat_last_n = *repeat_last_n;
  if (seed) opt.seed = *seed;
  opt.ignore_eos = ignore_eos ? 1 : 0;
  std::vector<const char*> stops;
  for (const std::string& s : stop) stops.push_back(s.c_str());
  opt.n_stop = static_cast<uint32_t>(stops.size());
  opt.stop = stops.empty() ? nullptr : stops.data();

  PyCallback cb{on_piece, {}, {}};
  pocket_stats stats{};
  stats.struct_size = sizeof stats;
  pocket_status st;
  {
    nb::gil_scoped_release release;
    st = chat ? pocket_session_chat(as_session(session), text.c_str(), &opt, on_text, &cb, &stats)
              : pocket_session_generate(as_session(session), text.c_str(), &opt, on_text, &cb, &stats);
  }
  cb.rethrow();
  check(st);
  return nb::make_tuple(nb::str(cb.text.data(), cb.text.size()),
                        nb::make_tuple(stats.prompt_tokens, stats.reused_tokens, stats.generated_tokens,
                                       stats.stop_reason, stats.context_used, stats.prefill_seconds,
                                       stats.decode_seconds));
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "Pocket's C API, one function per call (use the classes in the pocket package)";
  m.def("version", [] { return std::string(pocket_version()); });
  m.def("abi_version", [] { return pocket_abi_version(); });
  m.def("status_name", [](int status) { return std::string(pocket_status_name(status)); });
  m.def("stop_reason_name", [](int reason) { return std::string(pocket_stop_reason_name(reason)); });
  m.def("model_open", &model_open, nb::arg("path"), nb::arg("tokenizer").none(), nb::arg("on_progress").none(),
        nb::arg("on_log").none(), nb::arg("log_level"));
  m.def("model_close", [](uintptr_t model) { check(pocket_model_close(as_model(model))); });
  m.def("model_info", &model_info);
  m.def("tokenize", &tokenize, nb::arg("model"), nb::arg("text"), nb::arg("special"));
  m.def("detokenize", &detokenize, nb::arg("model"), nb::arg("ids"));
  m.def("session_open", &session_open, nb::arg("model"), nb::arg("threads"), nb::arg("context"),
        nb::arg("thinking"), nb::arg("system_prompt").none(), nb::arg("mem_budget_mb"), nb::arg("batch"),
        nb::arg("kv_cache").none());
  m.def("session_close", &session_call<pocket_session_close>);
  m.def("session_reset", &session_call<pocket_session_reset>);
  m.def("session_save_state", &session_path_call<pocket_session_save_state>, nb::arg("session"), nb::arg("path"));
  m.def("session_load_state", &session_path_call<pocket_session_load_state>, nb::arg("session"), nb::arg("path"));
  m.def("session_share_chat_start", &share_chat_start, nb::arg("source"), nb::arg("targets"));
  m.def("session_cancel", [](uintptr_t session) { check(pocket_session_cancel(as_session(session))); });
  m.def("session_set_threads",
        [](uintptr_t session, int32_t n) { check(pocket_session_set_threads(as_session(session), n)); });
  m.def("session_get_threads", &get_threads);
  m.def("session_context_size", &context_size);
  m.def("session_kv_cache", &kv_cache);
  m.def("generate", &generate, nb::arg("session"), nb::arg("chat"), nb::arg("text"), nb::arg("max_tokens").none(),
        nb::arg("temperature").none(), nb::arg("top_k").none(), nb::arg("top_p").none(), nb::arg("min_p").none(),
        nb::arg("repeat_penalty").none(), nb::arg("repeat_last_n").none(), nb::arg("seed").none(),
        nb::arg("ignore_eos"), nb::arg("stop"), nb::arg("on_piece").none());
}
