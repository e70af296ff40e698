/* The JNI layer of Pocket's Java binding: each native method of
 * dev.pocket.NativeLib is one call of the C API (include/pocket/pocket_c.h),
 * nothing more. What this file owns:
 *  - handles: a pocket_model / pocket_session pointer travels to Java as a
 *    jlong and back unchanged (the C API checks it, so a stale one is an
 *    error code, never a crash);
 *  - text: Java passes UTF-8 bytes (String.getBytes(UTF_8), NUL-terminated
 *    where the C API wants a C string) and gets UTF-8 bytes back, so no text
 *    goes through JNI's "modified UTF-8" (which mangles characters outside
 *    the BMP and NUL);
 *  - errors: a failed call throws dev.pocket.PocketException built by its
 *    static fromNative(status, messageBytes) with pocket_last_error();
 *  - streaming: the text callback calls the Java sink's onPiece(byte[]); a
 *    Java exception thrown there stops the generation and is left pending, so
 *    it reaches the caller when the native method returns.
 * Written in C99 so it builds with the same flags as examples/c. */
#include <jni.h>
#include <pocket/pocket_c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Throws PocketException(status, pocket_last_error()). Returns 0 so callers can
 * `return throw_status(...)` from functions returning a handle. */
static jlong throw_status(JNIEnv* env, int status) {
  if ((*env)->ExceptionCheck(env)) return 0; /* a Java exception is already on its way */
  jclass cls = (*env)->FindClass(env, "dev/pocket/PocketException");
  if (cls == NULL) return 0;
  jmethodID make = (*env)->GetStaticMethodID(env, cls, "fromNative", "(I[B)Ldev/pocket/PocketException;");
  if (make == NULL) return 0;
  const char* message = pocket_last_error();
  const jsize n = (jsize)strlen(message);
  jbyteArray bytes = (*env)->NewByteArray(env, n);
  if (bytes == NULL) return 0;
  (*env)->SetByteArrayRegion(env, bytes, 0, n, (const jbyte*)message);
  jobject ex = (*env)->CallStaticObjectMethod(env, cls, make, (jint)status, bytes);
  if (ex != NULL && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
  return 0;
}

static void throw_java(JNIEnv* env, const char* class_name, const char* message) {
  jclass cls = (*env)->FindClass(env, class_name);
  if (cls != NULL) (*env)->ThrowNew(env, cls, message);
}

static pocket_model* as_model(jlong h) { return (pocket_model*)(uintptr_t)h; }
static pocket_session* as_session(jlong h) { return (pocket_session*)(uintptr_t)h; }

/* The bytes of a Java byte[] (NUL-terminated by the Java side when the C API
 * wants a C string), copied so no JNI critical region spans a C API call. */
static char* copy_bytes(JNIEnv* env, jbyteArray array, size_t* length) {
  if (array == NULL) {
    *length = 0;
    return NULL;
  }
  const jsize n = (*env)->GetArrayLength(env, array);
  char* out = (char*)malloc((size_t)n + 1);
  if (out == NULL) {
    throw_java(env, "java/lang/OutOfMemoryError", "pocket: out of memory copying text");
    return NULL;
  }
  (*env)->GetByteArrayRegion(env, array, 0, n, (jbyte*)out);
  out[n] = '\0';
  *length = (size_t)n;
  return out;
}

static jbyteArray new_bytes(JNIEnv* env, const char* data, size_t length) {
  jbyteArray out = (*env)->NewByteArray(env, (jsize)length);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, (jsize)length, (const jbyte*)data);
  return out;
}

/* ---- library ----------------------------------------------------------- */

JNIEXPORT jbyteArray JNICALL Java_dev_pocket_NativeLib_version(JNIEnv* env, jclass cls) {
  const char* v = pocket_version();
  return new_bytes(env, v, strlen(v));
}

JNIEXPORT jint JNICALL Java_dev_pocket_NativeLib_abiVersion(JNIEnv* env, jclass cls) {
  return pocket_abi_version();
}

/* ---- models ------------------------------------------------------------ */

struct progress {
  JNIEnv* env;
  jobject target; /* dev.pocket.ProgressCallback */
  jmethodID on_progress;
};

/* Loading progress, on the thread that opens the model: false or an exception stops loading. */
static int on_progress(float fraction, void* user_data) {
  struct progress* p = (struct progress*)user_data;
  const jboolean keep_going = (*p->env)->CallBooleanMethod(p->env, p->target, p->on_progress, (jfloat)fraction);
  if ((*p->env)->ExceptionCheck(p->env)) return 1;
  return keep_going ? 0 : 1;
}

JNIEXPORT jlong JNICALL Java_dev_pocket_NativeLib_modelOpen(JNIEnv* env, jclass cls, jbyteArray path,
                                                            jbyteArray tokenizer_path, jobject progress) {
  size_t n = 0, tn = 0;
  char* p = copy_bytes(env, path, &n);
  if (p == NULL) return 0;
  char* tp = copy_bytes(env, tokenizer_path, &tn);
  if (tokenizer_path != NULL && tp == NULL) {
    free(p);
    return 0;
  }
  pocket_model_options opt;
  pocket_model_options_init(&opt);
  opt.tokenizer_path = tp;
  struct progress pr = {env, progress, NULL};
  if (progress != NULL) {
    pr.on_progress = (*env)->GetMethodID(env, (*env)->GetObjectClass(env, progress), "onProgress", "(F)Z");
    opt.on_progress = pr.on_progress != NULL ? on_progress : NULL;
    opt.progress_user_data = &pr;
  }
  pocket_model* model = NULL;
  const pocket_status st = (*env)->ExceptionCheck(env) ? POCKET_ERR_FAILED : pocket_model_open(p, &opt, &model);
  free(p);
  free(tp);
  if (st != POCKET_OK) return throw_status(env, st); /* a pending Java exception wins */
  return (jlong)(uintptr_t)model;
}

JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_modelClose(JNIEnv* env, jclass cls, jlong model) {
  const pocket_status st = pocket_model_close(as_model(model));
  if (st != POCKET_OK) throw_status(env, st);
}

/* info[0..2] = vocab size, context length, layers; returns the architecture. */
JNIEXPORT jbyteArray JNICALL Java_dev_pocket_NativeLib_modelInfo(JNIEnv* env, jclass cls, jlong model,
                                                                 jintArray info) {
  pocket_model_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  const pocket_status st = pocket_model_get_info(as_model(model), &mi);
  if (st != POCKET_OK) return (throw_status(env, st), NULL);
  const jint values[3] = {mi.vocab_size, mi.context_length, mi.n_layers};
  (*env)->SetIntArrayRegion(env, info, 0, 3, values);
  return new_bytes(env, mi.architecture, strlen(mi.architecture));
}

JNIEXPORT jintArray JNICALL Java_dev_pocket_NativeLib_tokenize(JNIEnv* env, jclass cls, jlong model,
                                                               jbyteArray text, jboolean special) {
  size_t n = 0, n_ids = 0;
  char* t = copy_bytes(env, text, &n);
  if (t == NULL) return NULL;
  /* Ask for the size first, then fill. */
  pocket_status st = pocket_tokenize(as_model(model), t, n, special, NULL, 0, &n_ids);
  int32_t* ids = NULL;
  if (st == POCKET_ERR_BUFFER_TOO_SMALL || (st == POCKET_OK && n_ids > 0)) {
    ids = (int32_t*)malloc(n_ids * sizeof(int32_t));
    if (ids == NULL) {
      free(t);
      throw_java(env, "java/lang/OutOfMemoryError", "pocket: out of memory for token ids");
      return NULL;
    }
    st = pocket_tokenize(as_model(model), t, n, special, ids, n_ids, &n_ids);
  }
  free(t);
  jintArray out = NULL;
  if (st != POCKET_OK) {
    throw_status(env, st);
  } else {
    out = (*env)->NewIntArray(env, (jsize)n_ids);
    if (out != NULL && n_ids > 0) (*env)->SetIntArrayRegion(env, out, 0, (jsize)n_ids, (const jint*)ids);
  }
  free(ids);
  return out;
}

JNIEXPORT jbyteArray JNICALL Java_dev_pocket_NativeLib_detokenize(JNIEnv* env, jclass cls, jlong model,
                                                                  jintArray ids) {
  const jsize n = (*env)->GetArrayLength(env, ids);
  int32_t* buf = (int32_t*)malloc(((size_t)n + 1) * sizeof(int32_t));
  if (buf == NULL) {
    throw_java(env, "java/lang/OutOfMemoryError", "pocket: out of memory for token ids");
    return NULL;
  }
  (*env)->GetIntArrayRegion(env, ids, 0, n, (jint*)buf);
  size_t length = 0;
  pocket_status st = pocket_detokenize(as_model(model), buf, (size_t)n, NULL, 0, &length);
  char* text = NULL;
  if (st == POCKET_ERR_BUFFER_TOO_SMALL || st == POCKET_OK) {
    text = (char*)malloc(length + 1);
    st = text == NULL ? POCKET_ERR_OUT_OF_MEMORY
                      : pocket_detokenize(as_model(model), buf, (size_t)n, text, length + 1, &length);
  }
  free(buf);
  jbyteArray out = NULL;
  if (st != POCKET_OK) {
    throw_status(env, st);
  } else {
    out = new_bytes(env, text, length);
  }
  free(text);
  return out;
}

/* ---- sessions ---------------------------------------------------------- */

JNIEXPORT jlong JNICALL Java_dev_pocket_NativeLib_sessionOpen(JNIEnv* env, jclass cls, jlong model, jint threads,
                                                              jint context, jboolean thinking,
                                                              jbyteArray system_prompt, jint mem_budget_mb,
                                                              jint batch, jbyteArray kv_cache) {
  size_t n = 0;
  char* sys = copy_bytes(env, system_prompt, &n);
  if (system_prompt != NULL && sys == NULL) return 0;
  char* kv = copy_bytes(env, kv_cache, &n);
  if (kv_cache != NULL && kv == NULL) {
    free(sys);
    return 0;
  }
  pocket_session_options opt;
  pocket_session_options_init(&opt);
  opt.threads = threads;
  opt.context = context;
  opt.enable_thinking = thinking ? 1 : 0;
  opt.system_prompt = sys;
  opt.mem_budget_mb = mem_budget_mb;
  opt.batch = batch;
  opt.kv_cache = kv;
  pocket_session* session = NULL;
  const pocket_status st = pocket_session_open(as_model(model), &opt, &session);
  free(sys);
  free(kv);
  if (st != POCKET_OK) return throw_status(env, st);
  return (jlong)(uintptr_t)session;
}

#define SESSION_CALL(name, call)                                                           \
  JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_##name(JNIEnv* env, jclass cls, jlong s) { \
    const pocket_status st = call(as_session(s));                                          \
    if (st != POCKET_OK) throw_status(env, st);                                            \
  }
SESSION_CALL(sessionClose, pocket_session_close)
SESSION_CALL(sessionCancel, pocket_session_cancel)
SESSION_CALL(sessionReset, pocket_session_reset)
#undef SESSION_CALL

/* Saved sessions: pocket_session_save_state / load_state with a path's bytes. */
#define SESSION_PATH_CALL(name, call)                                                                       \
  JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_##name(JNIEnv* env, jclass cls, jlong s, jbyteArray path) { \
    size_t n = 0;                                                                                          \
    char* p = copy_bytes(env, path, &n);                                                                   \
    if (p == NULL) return;                                                                                 \
    const pocket_status st = call(as_session(s), p);                                                       \
    free(p);                                                                                               \
    if (st != POCKET_OK) throw_status(env, st);                                                            \
  }
SESSION_PATH_CALL(saveState, pocket_session_save_state)
SESSION_PATH_CALL(loadState, pocket_session_load_state)
#undef SESSION_PATH_CALL

JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_shareChatStart(JNIEnv* env, jclass cls, jlong source,
                                                               jlongArray targets) {
  const jsize n = targets == NULL ? 0 : (*env)->GetArrayLength(env, targets);
  pocket_session** t = (pocket_session**)malloc(sizeof(pocket_session*) * (size_t)(n > 0 ? n : 1));
  if (t == NULL) {
    throw_status(env, POCKET_ERR_FAILED);
    return;
  }
  for (jsize i = 0; i < n; ++i) {
    jlong h = 0;
    (*env)->GetLongArrayRegion(env, targets, i, 1, &h);
    t[i] = as_session(h);
  }
  const pocket_status st = pocket_session_share_chat_start(as_session(source), t, (size_t)n);
  free(t);
  if (st != POCKET_OK) throw_status(env, st);
}

JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_setThreads(JNIEnv* env, jclass cls, jlong s, jint threads) {
  const pocket_status st = pocket_session_set_threads(as_session(s), threads);
  if (st != POCKET_OK) throw_status(env, st);
}

JNIEXPORT jint JNICALL Java_dev_pocket_NativeLib_getThreads(JNIEnv* env, jclass cls, jlong s) {
  int32_t threads = 0;
  const pocket_status st = pocket_session_get_threads(as_session(s), &threads);
  if (st != POCKET_OK) throw_status(env, st);
  return threads;
}

JNIEXPORT jint JNICALL Java_dev_pocket_NativeLib_contextSize(JNIEnv* env, jclass cls, jlong s) {
  int32_t size = 0;
  const pocket_status st = pocket_session_get_context_size(as_session(s), &size);
  if (st != POCKET_OK) throw_status(env, st);
  return size;
}

JNIEXPORT jbyteArray JNICALL Java_dev_pocket_NativeLib_kvCache(JNIEnv* env, jclass cls, jlong s) {
  const char* kv = NULL;
  const pocket_status st = pocket_session_get_kv_cache(as_session(s), &kv);
  if (st != POCKET_OK) {
    throw_status(env, st);
    return NULL;
  }
  const jsize len = (jsize)strlen(kv);
  jbyteArray out = (*env)->NewByteArray(env, len);
  if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, len, (const jbyte*)kv);
  return out;
}

/* ---- generation -------------------------------------------------------- */

/* Indices of GenerateOptions' int and float arrays and their "set" bits; the
 * Java class (GenerateOptions.java) uses the same numbers. */
enum { OPT_MAX_TOKENS = 0, OPT_TOP_K = 1, OPT_REPEAT_LAST_N = 2, OPT_IGNORE_EOS = 3, OPT_N_INTS = 4 };
enum { OPT_TEMPERATURE = 0, OPT_TOP_P = 1, OPT_MIN_P = 2, OPT_REPEAT_PENALTY = 3, OPT_N_FLOATS = 4 };
enum { OPT_SEED_BIT = 1 << 8 };

struct sink {
  JNIEnv* env;
  jobject target; /* dev.pocket.Session$Sink, or NULL */
  jmethodID on_piece;
};

static int on_text(const char* piece, size_t length, void* user_data) {
  struct sink* s = (struct sink*)user_data;
  JNIEnv* env = s->env;
  if (s->target == NULL) return 0;
  jbyteArray bytes = new_bytes(env, piece, length);
  if (bytes == NULL) return 1; /* OutOfMemoryError pending: stop */
  const jboolean keep_going = (*env)->CallBooleanMethod(env, s->target, s->on_piece, bytes);
  (*env)->DeleteLocalRef(env, bytes); /* one local reference per piece would pile up */
  if ((*env)->ExceptionCheck(env)) return 1; /* the callback threw: stop, leave it pending */
  return keep_going ? 0 : 1;
}

/* stats[0..6] = prompt, reused, generated tokens, stop reason, context used,
 * prefill seconds, decode seconds. */
JNIEXPORT void JNICALL Java_dev_pocket_NativeLib_generate(JNIEnv* env, jclass cls, jlong session, jboolean chat,
                                                          jbyteArray prompt, jint mask, jintArray ints,
                                                          jfloatArray floats, jlong seed, jobjectArray stop,
                                                          jobject target, jdoubleArray stats_out) {
  pocket_generate_options opt;
  pocket_generate_options_init(&opt);
  jint iv[OPT_N_INTS];
  jfloat fv[OPT_N_FLOATS];
  (*env)->GetIntArrayRegion(env, ints, 0, OPT_N_INTS, iv);
  (*env)->GetFloatArrayRegion(env, floats, 0, OPT_N_FLOATS, fv);
  if (mask & (1 << OPT_MAX_TOKENS)) opt.max_tokens = iv[OPT_MAX_TOKENS];
  if (mask & (1 << OPT_TOP_K)) opt.top_k = iv[OPT_TOP_K];
  if (mask & (1 << OPT_REPEAT_LAST_N)) opt.repeat_last_n = iv[OPT_REPEAT_LAST_N];
  if (mask & (1 << OPT_IGNORE_EOS)) opt.ignore_eos = iv[OPT_IGNORE_EOS];
  if (mask & (1 << (4 + OPT_TEMPERATURE))) opt.temperature = fv[OPT_TEMPERATURE];
  if (mask & (1 << (4 + OPT_TOP_P))) opt.top_p = fv[OPT_TOP_P];
  if (mask & (1 << (4 + OPT_MIN_P))) opt.min_p = fv[OPT_MIN_P];
  if (mask & (1 << (4 + OPT_REPEAT_PENALTY))) opt.repeat_penalty = fv[OPT_REPEAT_PENALTY];
  if (mask & OPT_SEED_BIT) opt.seed = (uint64_t)seed;

  /* Stop strings: each element a NUL-terminated UTF-8 byte[]. */
  const jsize n_stop = stop == NULL ? 0 : (*env)->GetArrayLength(env, stop);
  char** stops = n_stop > 0 ? (char**)calloc((size_t)n_stop, sizeof(char*)) : NULL;
  size_t n = 0;
  char* text = NULL;
  int ok = n_stop == 0 || stops != NULL;
  for (jsize i = 0; ok && i < n_stop; ++i) {
    jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, stop, i);
    stops[i] = copy_bytes(env, b, &n);
    (*env)->DeleteLocalRef(env, b);
    ok = stops[i] != NULL;
  }
  if (ok) text = copy_bytes(env, prompt, &n);
  if (!ok || text == NULL) {
    if (!(*env)->ExceptionCheck(env)) throw_java(env, "java/lang/OutOfMemoryError", "pocket: out of memory");
  } else {
    opt.n_stop = (uint32_t)n_stop;
    opt.stop = (const char* const*)stops;
    struct sink s = {env, target, NULL};
    if (target != NULL) {
      jclass sink_class = (*env)->GetObjectClass(env, target);
      s.on_piece = (*env)->GetMethodID(env, sink_class, "onPiece", "([B)Z");
    }
    if (target == NULL || s.on_piece != NULL) {
      pocket_stats stats;
      memset(&stats, 0, sizeof stats);
      stats.struct_size = sizeof stats;
      const pocket_status st = chat ? pocket_session_chat(as_session(session), text, &opt, on_text, &s, &stats)
                                    : pocket_session_generate(as_session(session), text, &opt, on_text, &s, &stats);
      if ((*env)->ExceptionCheck(env)) {
        /* the callback's exception goes to the caller as it is */
      } else if (st != POCKET_OK) {
        throw_status(env, st);
      } else {
        const jdouble values[7] = {stats.prompt_tokens,   stats.reused_tokens,   stats.generated_tokens,
                                   stats.stop_reason,     stats.context_used,    stats.prefill_seconds,
                                   stats.decode_seconds};
        (*env)->SetDoubleArrayRegion(env, stats_out, 0, 7, values);
      }
    }
  }
  free(text);
  for (jsize i = 0; stops != NULL && i < n_stop; ++i) free(stops[i]);
  free(stops);
}
