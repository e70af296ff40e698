package dev.pocket;

/**
 * The native methods: one per C API call (bindings/java/jni/pocket_jni.c).
 * Text crosses as UTF-8 bytes; handles as longs. Not public: use {@link Pocket}
 * and {@link Session}.
 */
final class NativeLib {
  private NativeLib() {}

  static {
    // Looks for libpocket_jni.so on java.library.path (on Android: the APK's
    // lib/<abi>/ folder); it loads libpocket.so beside it.
    System.loadLibrary(System.getProperty("pocket.jni.library", "pocket_jni"));
  }

  static native byte[] version();
  static native int abiVersion();

  static native long modelOpen(byte[] path, byte[] tokenizerPath, ProgressCallback progress);
  static native void modelClose(long model);
  static native byte[] modelInfo(long model, int[] info);
  static native int[] tokenize(long model, byte[] text, boolean special);
  static native byte[] detokenize(long model, int[] ids);

  static native long sessionOpen(long model, int threads, int context, boolean thinking, byte[] systemPrompt,
                                 int memBudgetMb, int batch, byte[] kvCache);
  static native void saveState(long session, byte[] path);
  static native void loadState(long session, byte[] path);
  static native void shareChatStart(long source, long[] targets);
  static native void sessionClose(long session);
  static native void sessionCancel(long session);
  static native void sessionReset(long session);
  static native void setThreads(long session, int threads);
  static native int getThreads(long session);
  static native int contextSize(long session);
  static native byte[] kvCache(long session);

  static native void generate(long session, boolean chat, byte[] prompt, int mask, int[] ints, float[] floats,
                              long seed, byte[][] stop, Object sink, double[] stats);
}
