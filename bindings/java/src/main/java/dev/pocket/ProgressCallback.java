package dev.pocket;

/**
 * Loading progress of {@link Pocket#open(String, String, ProgressCallback)}, from 0 to 1, on
 * the opening thread. Return {@code false} to stop loading (open throws a PocketException with
 * status CANCELLED); an exception thrown here stops it too and reaches the caller.
 */
@FunctionalInterface
public interface ProgressCallback {
  boolean onProgress(float fraction);
}
