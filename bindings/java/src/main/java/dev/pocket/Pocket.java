package dev.pocket;

import java.nio.charset.StandardCharsets;

/**
 * A model opened once (weights memory-mapped) and shared by any number of
 * {@link Session}s, each with its own KV cache:
 * <pre>
 * try (Pocket model = Pocket.open("model.gguf");
 *      Session s = model.newSession()) {
 *   String text = s.generate("Once upon a time", new GenerateOptions().maxTokens(32));
 * }
 * </pre>
 * Thread-safe: any thread may use a model at any time. Closing it while
 * sessions are open is allowed; the weights stay until the last session
 * closes. Failures throw {@link PocketException} with the library's message.
 */
public final class Pocket implements AutoCloseable {
  private final NativeHandle handle;

  private Pocket(long handle) {
    this.handle = new NativeHandle(handle, "model");
  }

  /** Opens a GGUF, Pocket, Hugging Face or llama2.c model. */
  public static Pocket open(String path) {
    return open(path, null);
  }

  /** As {@link #open(String)}, with the tokenizer file of a llama2.c checkpoint (null = found beside it). */
  public static Pocket open(String path, String tokenizerPath) {
    return open(path, tokenizerPath, null);
  }

  /** As {@link #open(String, String)}, reporting loading progress (null = none). */
  public static Pocket open(String path, String tokenizerPath, ProgressCallback progress) {
    if (path == null) throw new NullPointerException("path");
    return new Pocket(NativeLib.modelOpen(cString(path), tokenizerPath == null ? null : cString(tokenizerPath),
                                          progress));
  }

  /** The library's version, "MAJOR.MINOR.PATCH". */
  public static String version() {
    return new String(NativeLib.version(), StandardCharsets.UTF_8);
  }

  /** The library's ABI version (the soname number of libpocket.so). */
  public static int abiVersion() {
    return NativeLib.abiVersion();
  }

  /** A new, independent conversation on this model, with default options. */
  public Session newSession() {
    return newSession(new SessionOptions());
  }

  public Session newSession(SessionOptions o) {
    byte[] system = o.systemPrompt == null ? null : cString(o.systemPrompt);
    byte[] kv = o.kvCache == null ? null : cString(o.kvCache);
    return new Session(
        NativeLib.sessionOpen(handle(), o.threads, o.context, o.thinking, system, o.memBudgetMb, o.batch, kv));
  }

  /** Text to token ids (control tokens written in the text are plain text). */
  public int[] tokenize(String text) {
    return tokenize(text, false);
  }

  /** Text to token ids; {@code special} matches control tokens such as &lt;|im_start|&gt; in the text. */
  public int[] tokenize(String text, boolean special) {
    return NativeLib.tokenize(handle(), text.getBytes(StandardCharsets.UTF_8), special);
  }

  /** Token ids to text. */
  public String detokenize(int[] ids) {
    return new String(NativeLib.detokenize(handle(), ids), StandardCharsets.UTF_8);
  }

  /** Vocabulary size, context length, layers and architecture. */
  public Info info() {
    int[] v = new int[3];
    String arch = new String(NativeLib.modelInfo(handle(), v), StandardCharsets.UTF_8);
    return new Info(v[0], v[1], v[2], arch);
  }

  /** What {@link #info()} returns. */
  public static final class Info {
    public final int vocabSize, contextLength, layers;
    public final String architecture;

    Info(int vocabSize, int contextLength, int layers, String architecture) {
      this.vocabSize = vocabSize;
      this.contextLength = contextLength;
      this.layers = layers;
      this.architecture = architecture;
    }
  }

  /** Closes the handle; a second close does nothing. */
  @Override
  public void close() {
    handle.close(NativeLib::modelClose);
  }

  private long handle() {
    return handle.get();
  }

  // UTF-8 with a terminating NUL, for the C API's C strings.
  static byte[] cString(String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    byte[] out = new byte[b.length + 1];
    System.arraycopy(b, 0, out, 0, b.length);
    return out;
  }
}
