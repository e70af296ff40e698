package dev.pocket;

/** Options of a new session (pocket_session_options in pocket_c.h). */
public final class SessionOptions {
  int threads;          // 0 = all cores
  int context;          // 0 = the model's, at most 4096
  boolean thinking = true;
  String systemPrompt;  // null = none

  /** Worker threads; 0 (default) = all cores. Results are the same for any count. */
  public SessionOptions threads(int n) { threads = n; return this; }
  /** Context size in tokens; 0 (default) = the model's, at most 4096. */
  public SessionOptions context(int tokens) { context = tokens; return this; }
  /** Qwen3 chat: false adds an empty think block (default true). */
  public SessionOptions thinking(boolean on) { thinking = on; return this; }
  /** System prompt for chat (default none). */
  public SessionOptions systemPrompt(String s) { systemPrompt = s; return this; }
}
