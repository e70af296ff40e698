/* Pocket's C API: plain C99, for apps and for bindings (JNI, Python, ...).
 *
 *   pocket_model* model = NULL;
 *   pocket_session* session = NULL;
 *   if (pocket_model_open("model.gguf", NULL, &model) != POCKET_OK ||
 *       pocket_session_open(model, NULL, &session) != POCKET_OK) {
 *     fprintf(stderr, "%s\n", pocket_last_error());
 *     ...
 *   }
 *   pocket_generate_options opt;
 *   pocket_generate_options_init(&opt);
 *   opt.max_tokens = 64;
 *   pocket_session_generate(session, "Once upon a time", &opt, print_piece, NULL, NULL);
 *   pocket_session_close(session);
 *   pocket_model_close(model);
 *
 * Errors: every function returns a pocket_status (POCKET_OK = 0, else an
 * error code; nothing throws or aborts across this boundary), and a failed
 * call leaves a message naming the problem in pocket_last_error(), per
 * thread. Callbacks must return normally (a C++ exception thrown out of one
 * ends the process). One exception to "never aborts": a model file truncated
 * on disk while it is in use ends the process with a message naming it (a
 * SIGBUS in the mapping cannot be turned into an error code).
 *
 * Handles: pocket_model and pocket_session are opaque. A handle is a number
 * the library looks up on each call, not an address, so a closed, never
 * opened or NULL handle is an error (POCKET_ERR_INVALID_HANDLE), never a
 * crash; closing twice is such an error too. A model may be closed while
 * sessions on it are open: its weights stay until the last session closes.
 * Closing a session while another thread runs a call on it cancels that call;
 * the session is freed when the call returns.
 *
 * Threads: a model handle may be used from any number of threads at once.
 * A session runs one call at a time (a second concurrent call fails with
 * POCKET_ERR_BUSY); pocket_session_cancel() and pocket_session_close() may
 * be called from any thread at any time. Sessions are independent: N
 * threads may each drive their own session on one model.
 *
 * ABI: structs are passed by pointer, never by value. Each options/result
 * struct starts with struct_size, set by its _init function (or to sizeof by
 * the caller). New fields are only ever appended: the library reads only the
 * fields a caller's struct_size covers (the rest take their defaults) and
 * writes only the result fields it covers, so an app built against an older
 * header keeps working. A struct larger than the library knows is accepted
 * when the bytes it does not know are zero, and refused with
 * POCKET_ERR_UNSUPPORTED otherwise (an option the library cannot honour).
 * The structs have no implicit padding (on LP64 targets), so an appended
 * field always grows sizeof and is never read from an old app's padding.
 * Fields are never reordered, resized or removed while POCKET_ABI_VERSION
 * (the soname number, libpocket.so.POCKET_ABI_VERSION) stays the same;
 * pocket_abi_version() tells an app which library it was linked to at run time.
 * Functions that come later (constrained output, classification, state
 * save/restore, speculative decoding) are new functions and new appended
 * fields.
 *
 * Strings are UTF-8. Text passed in is NUL-terminated unless a length is
 * taken; text passed out to callbacks comes with its length and a NUL.
 */
#ifndef POCKET_POCKET_C_H
#define POCKET_POCKET_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(POCKET_C_BUILD) && defined(__GNUC__)
#define POCKET_API __attribute__((visibility("default")))
#else
#define POCKET_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define POCKET_ABI_VERSION 0
#define POCKET_VERSION_MAJOR 0
#define POCKET_VERSION_MINOR 1
#define POCKET_VERSION_PATCH 0

/* ---- errors ------------------------------------------------------------ */

typedef enum pocket_status {
  POCKET_OK = 0,
  POCKET_ERR_INVALID_ARGUMENT = 1, /* a NULL that must not be, an option out of range, an empty prompt */
  POCKET_ERR_INVALID_HANDLE = 2,   /* NULL, closed or never opened handle, or a handle of the other kind */
  POCKET_ERR_MODEL = 3,            /* the model cannot be opened or read (missing, malformed, unsupported,
                                      truncated while in use); the message names the file and field */
  POCKET_ERR_CONTEXT_FULL = 4,     /* the prompt (or the conversation so far) does not fit the context */
  POCKET_ERR_CANCELLED = 5,        /* loading was stopped by the progress callback */
  POCKET_ERR_BUSY = 6,             /* another thread is running a call on this session */
  POCKET_ERR_BUFFER_TOO_SMALL = 7, /* the output did not fit; the size needed was written */
  POCKET_ERR_OUT_OF_MEMORY = 8,
  POCKET_ERR_UNSUPPORTED = 9,      /* an options struct sets a field this library version does not know */
  POCKET_ERR_FAILED = 10,          /* anything else; the message says what */
  POCKET_ERR_INTERNAL = 11,        /* a bug in Pocket; the message says where */
  POCKET_STATUS_MAX_ = 0x7FFFFFFF  /* not a status: keeps the enum 32 bits wide on every compiler */
} pocket_status;

/* The message of the most recent failed call on this thread ("" if none).
 * Valid until the next failing call on this thread. Never NULL. */
POCKET_API const char* pocket_last_error(void);

/* "POCKET_OK", "POCKET_ERR_BUSY", ...; "unknown status" for other values. */
POCKET_API const char* pocket_status_name(int status);

/* ---- versions ---------------------------------------------------------- */

/* The library's version, "MAJOR.MINOR.PATCH". */
POCKET_API const char* pocket_version(void);
/* The library's ABI version; equals POCKET_ABI_VERSION of the header it was built with. */
POCKET_API int pocket_abi_version(void);

/* ---- callbacks --------------------------------------------------------- */

typedef enum pocket_log_level {
  POCKET_LOG_DEBUG = 0,
  POCKET_LOG_INFO = 1,
  POCKET_LOG_WARNING = 2,
  POCKET_LOG_ERROR = 3
} pocket_log_level;

/* Progress from 0 to 1 of loading a model (on the thread that opens it;
 * nonzero stops loading: pocket_model_open returns POCKET_ERR_CANCELLED) or
 * of processing a prompt (pocket_generate_options.on_prefill_progress). */
typedef int (*pocket_progress_fn)(float progress, void* user_data);

/* A log message (NUL-terminated, no newline), per model: called on the
 * thread whose call logs, never concurrently for one model. Must not call
 * into Pocket. */
typedef void (*pocket_log_fn)(int level, const char* message, void* user_data);

/* A piece of generated text: always whole UTF-8 characters, `length` bytes,
 * NUL-terminated; valid only during the call. Return nonzero to stop
 * generating (stop reason POCKET_STOP_CALLBACK). It may call
 * pocket_session_cancel(), pocket_session_close() and the model functions;
 * other calls on the same session fail with POCKET_ERR_BUSY. */
typedef int (*pocket_text_fn)(const char* piece, size_t length, void* user_data);

/* ---- models ------------------------------------------------------------ */

typedef struct pocket_model pocket_model;

typedef struct pocket_model_options {
  uint32_t struct_size;           /* sizeof(pocket_model_options) */
  int32_t log_level;              /* messages below this pocket_log_level are dropped; default INFO */
  const char* tokenizer_path;     /* llama2.c checkpoints: tokenizer.bin; NULL = found beside the model */
  pocket_progress_fn on_progress; /* NULL = none */
  void* progress_user_data;
  pocket_log_fn on_log;           /* NULL = none */
  void* log_user_data;
} pocket_model_options;

POCKET_API void pocket_model_options_init(pocket_model_options* options);

/* Opens a model file (GGUF, Pocket file, Hugging Face folder, llama2.c
 * checkpoint): its weights are mapped once and shared by every session on
 * it. `options` may be NULL (defaults). On failure *model is NULL. */
POCKET_API pocket_status pocket_model_open(const char* path, const pocket_model_options* options,
                                           pocket_model** model);
POCKET_API pocket_status pocket_model_close(pocket_model* model);

typedef struct pocket_model_info {
  uint32_t struct_size;     /* sizeof(pocket_model_info), set by the caller */
  int32_t vocab_size;
  int32_t context_length;   /* the model's (a session's context may be smaller) */
  int32_t n_layers;
  const char* architecture; /* "llama", "qwen2", "qwen3", ...; valid while the model is open */
} pocket_model_info;

POCKET_API pocket_status pocket_model_get_info(const pocket_model* model, pocket_model_info* info);

/* Text to token ids. `text_length` bytes of `text` (it need not be
 * NUL-terminated). `allow_special` nonzero matches control tokens such as
 * <|im_start|> written in the text. Writes at most `capacity` ids and the
 * number of ids to *n_ids; POCKET_ERR_BUFFER_TOO_SMALL (with *n_ids the
 * number needed) when they do not fit. `ids` may be NULL when capacity is 0. */
POCKET_API pocket_status pocket_tokenize(const pocket_model* model, const char* text, size_t text_length,
                                         int allow_special, int32_t* ids, size_t capacity, size_t* n_ids);

/* Token ids to text, NUL-terminated in `text`. *length gets the text's
 * length without the NUL; POCKET_ERR_BUFFER_TOO_SMALL when capacity <
 * length + 1 (`text` may be NULL when capacity is 0). An id outside the
 * vocabulary is POCKET_ERR_INVALID_ARGUMENT. */
POCKET_API pocket_status pocket_detokenize(const pocket_model* model, const int32_t* ids, size_t n_ids, char* text,
                                           size_t capacity, size_t* length);

/* ---- sessions ---------------------------------------------------------- */

typedef struct pocket_session pocket_session;

typedef struct pocket_session_options {
  uint32_t struct_size;      /* sizeof(pocket_session_options) */
  int32_t threads;           /* worker threads; 0 = all cores */
  int32_t context;           /* context size in tokens; 0 = the model's, at most 4096 */
  int32_t enable_thinking;   /* Qwen3 chat: 0 adds an empty <think></think> block; default 1 */
  const char* system_prompt; /* for chat; NULL = none */
  /* Memory budget (appended): the model's resident weights, tokenizer, this
   * session's KV cache, scratch and an overhead allowance must fit in
   * mem_budget_mb MiB, else pocket_session_open fails with
   * POCKET_ERR_INVALID_ARGUMENT and a message giving the numbers; with
   * context 0 the largest context that fits is chosen. 0 = no budget. */
  int32_t mem_budget_mb;
  int32_t batch;             /* prompt tokens per forward pass (chunked prefill), 1-128; 0 = 128 */
  /* KV cache type (appended): "f16", "q8" (int8 keys and values with a
   * scale per row, about half the memory) or "q4" (4-bit codes with a scale
   * per row, about a quarter); NULL: f16, or under mem_budget_mb the plan's
   * choice (f16 when the context fits with it, else q8; see
   * pocket_session_get_kv_cache). Anything else fails pocket_session_open
   * with POCKET_ERR_INVALID_ARGUMENT. */
  const char* kv_cache;
} pocket_session_options;

POCKET_API void pocket_session_options_init(pocket_session_options* options);

/* A new, independent conversation on `model`: it costs its KV cache, scratch
 * buffers and worker threads, not another copy of the weights. */
POCKET_API pocket_status pocket_session_open(pocket_model* model, const pocket_session_options* options,
                                             pocket_session** session);
POCKET_API pocket_status pocket_session_close(pocket_session* session);

typedef struct pocket_generate_options {
  uint32_t struct_size;    /* sizeof(pocket_generate_options) */
  int32_t max_tokens;      /* default 256 */
  float temperature;       /* 0 = greedy; default 0.8 */
  int32_t top_k;           /* 0 = off; default 40 */
  float top_p;             /* 1 = off; default 0.95 */
  float min_p;             /* 0 = off; default 0.05 */
  float repeat_penalty;    /* 1 = off; default 1 */
  int32_t repeat_last_n;   /* default 64 */
  uint64_t seed;           /* default 0 */
  int32_t ignore_eos;      /* nonzero: keep going past end-of-sequence tokens */
  uint32_t n_stop;         /* number of stop strings */
  const char* const* stop; /* n_stop stop strings (not included in the output); NULL when n_stop is 0 */
  /* Called after each batch of the prompt with the fraction of its new
   * tokens processed; return nonzero to stop (POCKET_STOP_CANCELLED; the
   * part done stays in the KV cache and a later call reuses it). */
  pocket_progress_fn on_prefill_progress;
  void* prefill_user_data;
  /* Structured output (appended): the output
   * must match the constraint; end-of-sequence only where it is complete.
   * constraint_kind: NULL or "" (none), "json-schema", "json", "regex",
   * "choice", "grammar" (GBNF). constraint_text: the schema, regex or
   * grammar (NUL-terminated; unused for "json" and "choice"). For "choice",
   * n_choices strings in choices. A bad schema or grammar fails the call
   * with POCKET_ERR_INVALID_ARGUMENT and a message naming the problem. */
  const char* constraint_kind;
  const char* constraint_text;
  const char* const* choices;
  uint32_t n_choices;
  int32_t json_whitespace; /* JSON: whitespace characters allowed between tokens, 0-64 (default 0: compact) */
  /* Appended: JSON Schema: nonzero reads an absent additionalProperties (or
   * items after prefixItems) as the specification does, allowing more;
   * 0 (default) closes objects and tuples to what the schema lists. */
  int32_t json_open;
} pocket_generate_options;

POCKET_API void pocket_generate_options_init(pocket_generate_options* options);

typedef enum pocket_stop_reason {
  POCKET_STOP_NONE = 0,        /* not set (the call failed) */
  POCKET_STOP_EOS = 1,
  POCKET_STOP_STOP_STRING = 2,
  POCKET_STOP_MAX_TOKENS = 3,
  POCKET_STOP_CONTEXT_FULL = 4,
  POCKET_STOP_CALLBACK = 5,    /* the text callback returned nonzero */
  POCKET_STOP_CANCELLED = 6,   /* pocket_session_cancel */
  POCKET_STOP_CONSTRAINT = 7   /* the constraint is complete and nothing can follow */
} pocket_stop_reason;

/* "eos", "stop string", "max tokens", "context full", "stopped by caller", "cancelled", "constraint complete". */
POCKET_API const char* pocket_stop_reason_name(int reason);

typedef struct pocket_stats {
  uint32_t struct_size;     /* sizeof(pocket_stats), set by the caller */
  int32_t prompt_tokens;    /* tokens the model was given */
  int32_t reused_tokens;    /* of those, already in the KV cache (earlier chat turns) */
  int32_t generated_tokens;
  int32_t stop_reason;      /* pocket_stop_reason */
  int32_t context_used;     /* tokens in the session's KV cache after the call */
  double prefill_seconds;
  double decode_seconds;
  int32_t constraint_complete; /* with a constraint: 1 when the output is a complete match (appended) */
  int32_t reserved;            /* zero */
} pocket_stats;

/* Continues `prompt` as plain text (no chat template), streaming pieces to
 * `on_text` (may be NULL) with `user_data`. `options` may be NULL
 * (defaults); `stats` may be NULL. Stopping (callback, cancel, stop string,
 * end of sequence, token limit) is not an error: the call returns POCKET_OK
 * and stats->stop_reason says why it stopped. */
POCKET_API pocket_status pocket_session_generate(pocket_session* session, const char* prompt,
                                                 const pocket_generate_options* options, pocket_text_fn on_text,
                                                 void* user_data, pocket_stats* stats);

/* Sends one user message in the session's conversation (the model's chat
 * template) and streams the reply. Earlier turns' KV cache is reused. */
POCKET_API pocket_status pocket_session_chat(pocket_session* session, const char* message,
                                             const pocket_generate_options* options, pocket_text_fn on_text,
                                             void* user_data, pocket_stats* stats);

/* Forgets the conversation and the KV cache. */
POCKET_API pocket_status pocket_session_reset(pocket_session* session);

/* Saved sessions: writes the conversation and KV cache to `path`
 * (atomically), or replaces the session's conversation with one saved from
 * a session on the same model (same KV type, fitting its context). A file
 * from another model, truncated or damaged gives an error and leaves the
 * session as it was. */
POCKET_API pocket_status pocket_session_save_state(pocket_session* session, const char* path);
POCKET_API pocket_status pocket_session_load_state(pocket_session* session, const char* path);

/* One model, many sessions: a long system prompt prefilled once and shared.
 * Starts a new conversation on `source`, prefills its start (the
 * beginning-of-sequence token and the system prompt, as the chat template
 * renders them before the first user turn), then starts a new conversation
 * on each of the `n_targets` sessions from a copy of those KV rows instead
 * of prefilling them again. The sessions must be on the same model; a
 * target whose system prompt differs recomputes from where it differs. On
 * an error (a NULL or closed handle, a context too small) the targets
 * before the failing one have been started. */
POCKET_API pocket_status pocket_session_share_chat_start(pocket_session* source, pocket_session* const* targets,
                                                         size_t n_targets);

/* Stops the generate/chat call running on `session`, from any thread (or
 * from its text callback): it returns within one decode step (or one batch
 * of the prompt) with POCKET_STOP_CANCELLED. When no call is running this
 * does nothing: a call that starts later is not affected. */
POCKET_API pocket_status pocket_session_cancel(pocket_session* session);

/* Worker threads (>= 1); results are identical for any count. */
POCKET_API pocket_status pocket_session_set_threads(pocket_session* session, int32_t threads);
POCKET_API pocket_status pocket_session_get_threads(const pocket_session* session, int32_t* threads);
/* The session's context size in tokens. */
POCKET_API pocket_status pocket_session_get_context_size(const pocket_session* session, int32_t* context_size);
/* The session's KV cache type: "f16", "q8" or "q4" (a static string). */
POCKET_API pocket_status pocket_session_get_kv_cache(const pocket_session* session, const char** kv_cache);

/* ---- decision heads: classify, route, rank ------------------------------ */
/* One prefill per input, no decoding (docs/decision_head.md). Heads come
 * from `pocket train-head`; those stored in the model's Pocket file are
 * available by name without adding them. A head trained on another model
 * (its base content hash differs) is refused with POCKET_ERR_FAILED. */

/* Adds a head file, or "model.pq4#name", to the session (replacing a head of
 * the same name). */
POCKET_API pocket_status pocket_session_add_head(pocket_session* session, const char* path);

typedef struct pocket_classification {
  uint32_t struct_size; /* sizeof(pocket_classification), set by the caller */
  int32_t label_index;  /* in the head's labels; -1 when routed out of scope */
  float probability;    /* calibrated probability of the top label */
  int32_t out_of_scope; /* 1 when routed out of scope (the label is the head's out-of-scope label) */
} pocket_classification;

/* Classifies `text` with the head named `head`; `route` nonzero applies the
 * head's out-of-scope threshold. The label is written NUL-terminated to
 * `label` (*label_length = its length without the NUL;
 * POCKET_ERR_BUFFER_TOO_SMALL when it does not fit; `label` may be NULL when
 * capacity is 0). `result` may be NULL. */
POCKET_API pocket_status pocket_session_classify(pocket_session* session, const char* head, const char* text,
                                                 int route, pocket_classification* result, char* label,
                                                 size_t capacity, size_t* label_length);

/* Ranks `n` candidates for `query`, best first: order[i] is the index of the
 * i-th best candidate and scores[i] (may be NULL) its score. `head` names a
 * ranking head; NULL ranks zero-shot by the candidates' mean token
 * log-probability after the query. The query's KV cache is computed once. */
POCKET_API pocket_status pocket_session_rank(pocket_session* session, const char* head, const char* query,
                                             const char* const* candidates, size_t n, int32_t* order, double* scores);

#ifdef __cplusplus
}
#endif

#endif /* POCKET_POCKET_C_H */
