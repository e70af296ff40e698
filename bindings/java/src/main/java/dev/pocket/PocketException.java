package dev.pocket;

import java.nio.charset.StandardCharsets;

/**
 * A failed call of Pocket's C API: {@link #getMessage()} is the library's
 * message naming the problem (the file and field of a bad model, the option
 * out of range), {@link #status()} its status code.
 */
public class PocketException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The C API's status codes (pocket_status in pocket_c.h). */
  public enum Status {
    OK, INVALID_ARGUMENT, INVALID_HANDLE, MODEL, CONTEXT_FULL, CANCELLED, BUSY, BUFFER_TOO_SMALL,
    OUT_OF_MEMORY, UNSUPPORTED, FAILED, INTERNAL;

    static Status of(int code) {
      Status[] all = values();
      return code >= 0 && code < all.length ? all[code] : FAILED;
    }
  }

  private final Status status;

  public PocketException(Status status, String message) {
    super(message);
    this.status = status;
  }

  /** The status code of the failed call. */
  public Status status() {
    return status;
  }

  // Called by the JNI layer with pocket_last_error()'s UTF-8 bytes.
  static PocketException fromNative(int status, byte[] message) {
    return new PocketException(Status.of(status), new String(message, StandardCharsets.UTF_8));
  }
}
