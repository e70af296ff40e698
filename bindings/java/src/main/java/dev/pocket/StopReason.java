package dev.pocket;

/** Why a generation stopped (pocket_stop_reason in pocket_c.h, same order). */
public enum StopReason {
  NONE, EOS, STOP_STRING, MAX_TOKENS, CONTEXT_FULL, CALLBACK, CANCELLED;

  static StopReason of(int code) {
    StopReason[] all = values();
    return code >= 0 && code < all.length ? all[code] : NONE;
  }
}
