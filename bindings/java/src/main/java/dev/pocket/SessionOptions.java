package dev.pocket;

/** Options of a new session (pocket_session_options in pocket_c.h). */
public final class SessionOptions {
  int threads;          // 0 = all cores
  int context;          // 0 = the model's, at most 4096
  boolean thinking = true;
  String systemPrompt;  // null = none
  int memBudgetMb;      // 0 = no budget
  int batch;            // 0 = 128
  String kvCache;       // null = f16, or the memory plan's choice

  /** Worker threads; 0 (default) = all cores. Results are the same for any count. */
  public SessionOptions threads(int n) { threads = n; return this; }
  /** Context size in tokens; 0 (default) = the model's, at most 4096. */
  public SessionOptions context(int tokens) { context = tokens; return this; }
  /** Qwen3 chat: false adds an empty think block (default true). */
  public SessionOptions thinking(boolean on) { thinking = on; return this; }
  /** System prompt for chat (default none). */
  public SessionOptions systemPrompt(String s) { systemPrompt = s; return this; }
  /**
   * Hard memory budget in MiB (default 0 = none): weights, tokenizer, KV cache, scratch and overhead must
   * fit, else opening throws (INVALID_ARGUMENT, with the numbers); with context 0 the largest context that
   * fits is chosen.
   */
  public SessionOptions memBudgetMb(int mib) { memBudgetMb = mib; return this; }
  /** Prompt tokens per forward pass (chunked prefill), 1-128; 0 (default) = 128. */
  public SessionOptions batch(int tokens) { batch = tokens; return this; }
  /**
   * KV cache type: "f16", "q8" (int8 rows, about half the memory) or "q4" (4-bit, about a quarter; costs
   * quality). Default null: f16, or under a memory budget the plan's choice (f16 when the context fits with
   * it, else q8); {@link Session#kvCache()} says which. Anything else makes opening throw INVALID_ARGUMENT.
   */
  public SessionOptions kvCache(String type) { kvCache = type; return this; }
}
