package dev.pocket;

/** What one generate/chat call did (pocket_stats in pocket_c.h). */
public final class Stats {
  /** Tokens the model was given, and of those, already in the KV cache. */
  public final int promptTokens, reusedTokens;
  public final int generatedTokens;
  public final StopReason stopReason;
  /** Tokens in the session's KV cache after the call. */
  public final int contextUsed;
  public final double prefillSeconds, decodeSeconds;

  Stats(double[] v) {
    promptTokens = (int) v[0];
    reusedTokens = (int) v[1];
    generatedTokens = (int) v[2];
    stopReason = StopReason.of((int) v[3]);
    contextUsed = (int) v[4];
    prefillSeconds = v[5];
    decodeSeconds = v[6];
  }

  @Override
  public String toString() {
    return String.format("%d prompt tokens (%d reused), %d generated, stop: %s, %.3f s prefill, %.3f s decode",
        promptTokens, reusedTokens, generatedTokens, stopReason, prefillSeconds, decodeSeconds);
  }
}
