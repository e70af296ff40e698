package dev.pocket;

import java.nio.charset.StandardCharsets;

/**
 * Sampling and stopping options of one generate/chat call. Every option
 * left unset takes the library's default (pocket_generate_options_init), so
 * defaults are never copied here:
 * <pre>new GenerateOptions().maxTokens(64).temperature(0f).stop("\n\n")</pre>
 */
public final class GenerateOptions {
  // Indices and "set" bits shared with pocket_jni.c.
  static final int MAX_TOKENS = 0, TOP_K = 1, REPEAT_LAST_N = 2, IGNORE_EOS = 3;
  static final int TEMPERATURE = 0, TOP_P = 1, MIN_P = 2, REPEAT_PENALTY = 3;
  static final int SEED_BIT = 1 << 8;

  final int[] ints = new int[4];
  final float[] floats = new float[4];
  int mask;
  long seed;
  byte[][] stop = new byte[0][];

  private GenerateOptions setInt(int i, int v) {
    ints[i] = v;
    mask |= 1 << i;
    return this;
  }

  private GenerateOptions setFloat(int i, float v) {
    floats[i] = v;
    mask |= 1 << (4 + i);
    return this;
  }

  /** Tokens to generate at most (default 256). */
  public GenerateOptions maxTokens(int n) { return setInt(MAX_TOKENS, n); }
  /** 0 = greedy (default 0.8). */
  public GenerateOptions temperature(float t) { return setFloat(TEMPERATURE, t); }
  public GenerateOptions topK(int k) { return setInt(TOP_K, k); }
  public GenerateOptions topP(float p) { return setFloat(TOP_P, p); }
  public GenerateOptions minP(float p) { return setFloat(MIN_P, p); }
  public GenerateOptions repeatPenalty(float p) { return setFloat(REPEAT_PENALTY, p); }
  public GenerateOptions repeatLastN(int n) { return setInt(REPEAT_LAST_N, n); }
  public GenerateOptions ignoreEos(boolean on) { return setInt(IGNORE_EOS, on ? 1 : 0); }

  public GenerateOptions seed(long s) {
    seed = s;
    mask |= SEED_BIT;
    return this;
  }

  /** Stop strings: generation ends before the first one (not included in the text). */
  public GenerateOptions stop(String... strings) {
    byte[][] out = new byte[strings.length][];
    for (int i = 0; i < strings.length; i++) out[i] = Pocket.cString(strings[i]);
    stop = out;
    return this;
  }
}
