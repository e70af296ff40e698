package dev.pocket;

/**
 * Receives generated text as it is produced, on the thread that called
 * generate/chat. Each piece is whole characters (never half of a UTF-8
 * sequence). Return {@code true} to keep going, {@code false} to stop
 * (stop reason {@link StopReason#CALLBACK}). An exception thrown here stops
 * the generation and is rethrown by generate/chat. From here, only
 * {@link Session#cancel()} and {@link Session#close()} may be called on the
 * same session.
 */
@FunctionalInterface
public interface TextCallback {
  boolean onText(String piece);
}
