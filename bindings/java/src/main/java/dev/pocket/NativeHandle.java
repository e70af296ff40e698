package dev.pocket;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/** A C API handle that is closed once, by whichever thread gets there first. */
final class NativeHandle {
  private final AtomicLong value;
  private final String what;

  NativeHandle(long value, String what) {
    this.value = new AtomicLong(value);
    this.what = what;
  }

  /** The handle; IllegalStateException once closed. */
  long get() {
    long h = value.get();
    if (h == 0) throw new IllegalStateException("pocket: the " + what + " is closed");
    return h;
  }

  /** The handle, or 0 once closed. */
  long peek() {
    return value.get();
  }

  void close(LongConsumer nativeClose) {
    long h = value.getAndSet(0);
    if (h != 0) nativeClose.accept(h);
  }
}
