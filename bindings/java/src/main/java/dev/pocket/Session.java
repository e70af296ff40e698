package dev.pocket;

import java.nio.charset.StandardCharsets;

/**
 * One conversation on a {@link Pocket} model: its own KV cache, so earlier
 * chat turns are never recomputed. One generate/chat call at a time (a second
 * concurrent call throws with status BUSY); {@link #cancel()} and
 * {@link #close()} may be called from any thread at any time: a running call
 * then returns within one decode step with {@link StopReason#CANCELLED}.
 */
public final class Session implements AutoCloseable {
  private static final GenerateOptions DEFAULTS = new GenerateOptions();
  private final NativeHandle handle;
  private volatile Stats lastStats;

  Session(long handle) {
    this.handle = new NativeHandle(handle, "session");
  }

  /** Continues {@code prompt} as plain text (no chat template) and returns the generated text. */
  public String generate(String prompt) {
    return generate(prompt, DEFAULTS);
  }

  public String generate(String prompt, GenerateOptions options) {
    return collect(false, prompt, options);
  }

  /** Streams the continuation of {@code prompt} to {@code callback}; returns the call's statistics. */
  public Stats generate(String prompt, GenerateOptions options, TextCallback callback) {
    return run(false, prompt, options, callback);
  }

  /** Sends one user message in this session's conversation (the model's chat template); returns the reply. */
  public String chat(String message) {
    return chat(message, DEFAULTS);
  }

  public String chat(String message, GenerateOptions options) {
    return collect(true, message, options);
  }

  /** Streams the reply to one user message; returns the call's statistics. */
  public Stats chat(String message, GenerateOptions options, TextCallback callback) {
    return run(true, message, options, callback);
  }

  /** Statistics of the last call that completed on this session (null before the first). */
  public Stats lastStats() {
    return lastStats;
  }

  /** Stops the generate/chat call running on this session, from any thread; does nothing when none runs. */
  public void cancel() {
    long h = handle.peek();
    if (h == 0) return;
    try {
      NativeLib.sessionCancel(h);
    } catch (PocketException e) {
      if (e.status() != PocketException.Status.INVALID_HANDLE) throw e;  // closed meanwhile: nothing to stop
    }
  }

  /** Forgets the conversation and its KV cache. */
  public void reset() {
    NativeLib.sessionReset(handle());
  }

  /** Writes the conversation and its KV cache to {@code path} (atomically), with the model's fingerprint. */
  public void saveState(String path) {
    if (path == null) throw new NullPointerException("path");
    NativeLib.saveState(handle(), Pocket.cString(path));
  }

  /**
   * Replaces the conversation with one saved from a session on the same model; it continues exactly as the
   * saved one would have. Another model's file, or a damaged one, throws and leaves this session as it was.
   */
  public void loadState(String path) {
    if (path == null) throw new NullPointerException("path");
    NativeLib.loadState(handle(), Pocket.cString(path));
  }

  /**
   * Starts a new conversation here, prefills its start (the system prompt as the chat template renders it)
   * once, and starts each target (sessions of the same model) from a copy of those KV rows.
   */
  public void shareChatStart(Session... targets) {
    long[] handles = new long[targets.length];
    for (int i = 0; i < targets.length; i++) handles[i] = targets[i].handle();
    NativeLib.shareChatStart(handle(), handles);
  }

  public int threads() {
    return NativeLib.getThreads(handle());
  }

  /** Worker threads (at least 1); results are the same for any count. */
  public void setThreads(int threads) {
    NativeLib.setThreads(handle(), threads);
  }

  /** The context size in tokens. */
  public int contextSize() {
    return NativeLib.contextSize(handle());
  }

  /** The KV cache type: "f16", "q8" or "q4" (as asked, or as the memory plan chose). */
  public String kvCache() {
    return new String(NativeLib.kvCache(handle()), java.nio.charset.StandardCharsets.UTF_8);
  }

  /** Closes the session (cancelling a call running on it); a second close does nothing. */
  @Override
  public void close() {
    handle.close(NativeLib::sessionClose);
  }

  private long handle() {
    return handle.get();
  }

  private String collect(boolean chat, String text, GenerateOptions o) {
    StringBuilder out = new StringBuilder();
    run(chat, text, o, piece -> {
      out.append(piece);
      return true;
    });
    return out.toString();
  }

  private Stats run(boolean chat, String text, GenerateOptions o, TextCallback callback) {
    if (text == null) throw new NullPointerException(chat ? "message" : "prompt");
    if (o == null) o = DEFAULTS;
    double[] stats = new double[7];
    NativeLib.generate(handle(), chat, Pocket.cString(text), o.mask, o.ints, o.floats, o.seed, o.stop,
                       callback == null ? null : new Sink(callback), stats);
    Stats s = new Stats(stats);
    lastStats = s;
    return s;
  }

  // What the JNI layer calls with each piece's UTF-8 bytes.
  private static final class Sink {
    private final TextCallback callback;

    Sink(TextCallback callback) {
      this.callback = callback;
    }

    @SuppressWarnings("unused") // called from pocket_jni.c
    boolean onPiece(byte[] utf8) {
      return callback.onText(new String(utf8, StandardCharsets.UTF_8));
    }
  }
}
