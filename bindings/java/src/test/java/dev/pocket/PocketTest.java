package dev.pocket;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java binding's tests on the host JVM (no JUnit: nothing to fetch):
 *   java -Djava.library.path=DIR -cp CLASSES dev.pocket.PocketTest MODEL [EXAMPLE_CLASS]
 * Each test prints one line; the exit status is the number of failures.
 */
public final class PocketTest {
  private static String modelPath;
  private static Pocket model;

  interface Body {
    void run() throws Exception;
  }

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static void equal(Object expected, Object actual, String what) {
    if (expected == null ? actual != null : !expected.equals(actual))
      throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
  }

  static GenerateOptions greedy(int n) {
    return new GenerateOptions().maxTokens(n).temperature(0f).ignoreEos(true);
  }

  public static void main(String[] args) throws Exception {
    modelPath = args[0];
    Map<String, Body> tests = new LinkedHashMap<>();
    tests.put("versions", PocketTest::versions);
    tests.put("opensAndGeneratesGreedyDeterministically", PocketTest::generates);
    tests.put("samplingOptionsReachTheLibrary", PocketTest::sampling);
    tests.put("streamedPiecesJoinToTheReturnedText", PocketTest::streams);
    tests.put("stopStringEndsTheTextBeforeIt", PocketTest::stopString);
    tests.put("callbackReturningFalseStops", PocketTest::callbackStops);
    tests.put("callbackExceptionReachesTheCaller", PocketTest::callbackThrows);
    tests.put("cancelFromAnotherThreadStopsWithinOneStep", PocketTest::cancels);
    tests.put("tokenizeDetokenizeRoundTrip", PocketTest::tokenizes);
    tests.put("twoSessionsAreIndependent", PocketTest::twoSessions);
    tests.put("chatReusesEarlierTurns", PocketTest::chat);
    tests.put("closeTwiceIsHarmlessAndUseAfterCloseThrows", PocketTest::closeTwice);
    tests.put("sessionOutlivesItsModelHandle", PocketTest::outlives);
    tests.put("loadProgressRisesToOneAndCanStop", PocketTest::progress);
    tests.put("badPathThrowsWithTheMessage", PocketTest::badPath);
    tests.put("badOptionsThrowInvalidArgument", PocketTest::badOptions);
    tests.put("savedSessionContinuesExactly", PocketTest::savedSession);
    tests.put("sharedChatStartGivesTheRepliesOfAFullPrefill", PocketTest::sharedChatStart);
    tests.put("memoryBudgetChoosesTheContextOrIsRefused", PocketTest::memoryBudget);
    if (args.length > 1) tests.put("exampleRuns", () -> runExample(args[1]));

    int failures = 0;
    model = Pocket.open(modelPath);
    try {
      for (Map.Entry<String, Body> t : tests.entrySet()) {
        long t0 = System.nanoTime();
        try {
          t.getValue().run();
          System.out.printf("PASS %s (%.0f ms)%n", t.getKey(), (System.nanoTime() - t0) / 1e6);
        } catch (Throwable e) {
          failures++;
          System.out.println("FAIL " + t.getKey() + ": " + e);
          e.printStackTrace(System.out);
        }
      }
    } finally {
      model.close();
    }
    System.out.println(failures == 0 ? "all " + tests.size() + " Java tests passed"
                                     : failures + " of " + tests.size() + " Java tests failed");
    System.exit(failures);
  }

  static void versions() {
    check(Pocket.version().matches("\\d+\\.\\d+\\.\\d+"), "version " + Pocket.version());
    check(Pocket.abiVersion() >= 0, "abi version");
  }

  static void generates() {
    Pocket.Info info = model.info();
    check(info.vocabSize > 0 && info.layers > 0 && !info.architecture.isEmpty(), "info");
    try (Session s = model.newSession(new SessionOptions().threads(1))) {
      String a = s.generate("Once upon a time", greedy(24));
      Stats st = s.lastStats();
      equal(24, st.generatedTokens, "generated tokens");
      equal(StopReason.MAX_TOKENS, st.stopReason, "stop reason");
      check(st.promptTokens > 0 && st.contextUsed >= st.promptTokens + 23, "stats " + st);
      check(!a.isEmpty(), "empty text");
      s.reset();
      equal(a, s.generate("Once upon a time", greedy(24)), "greedy text after reset");
      // What the model generated is what its tokens say.
      check(a.length() > 10, "short text: " + a);
    }
  }

  static void sampling() {
    try (Session s = model.newSession()) {
      GenerateOptions base = new GenerateOptions().maxTokens(40).ignoreEos(true).temperature(0.9f).minP(0f);
      String sampled = s.generate("Once upon a time", base.seed(5));
      equal(sampled, s.generate("Once upon a time", base.seed(5)), "same seed");
      check(!sampled.equals(s.generate("Once upon a time", base.seed(6))), "the seed is not passed on");
      check(!sampled.equals(s.generate("Once upon a time", base.seed(5).topK(2))), "top_k is not passed on");
      equal(s.generate("Once upon a time", greedy(40)),
            s.generate("Once upon a time", greedy(40).temperature(1f).topK(1).seed(9)), "top_k 1 is greedy");
    }
  }

  static void streams() {
    try (Session s = model.newSession()) {
      String whole = s.generate("One day", greedy(32));
      s.reset();
      List<String> pieces = new ArrayList<>();
      Stats st = s.generate("One day", greedy(32), p -> pieces.add(p));
      check(pieces.size() > 1, "pieces: " + pieces.size());
      equal(whole, String.join("", pieces), "joined pieces");
      equal(32, st.generatedTokens, "generated");
    }
  }

  static void stopString() {
    try (Session s = model.newSession()) {
      String whole = s.generate("Once upon a time", greedy(48));
      String stop = whole.substring(whole.length() / 2, whole.length() / 2 + 3);
      int at = whole.indexOf(stop);
      s.reset();
      String cut = s.generate("Once upon a time", greedy(48).stop(stop));
      equal(whole.substring(0, at), cut, "text before the stop string '" + stop + "'");
      equal(StopReason.STOP_STRING, s.lastStats().stopReason, "stop reason");
    }
  }

  static void callbackStops() {
    try (Session s = model.newSession()) {
      AtomicInteger n = new AtomicInteger();
      Stats st = s.generate("Once upon a time", greedy(64), p -> n.incrementAndGet() < 3);
      equal(3, n.get(), "pieces seen");
      equal(StopReason.CALLBACK, st.stopReason, "stop reason");
    }
  }

  static void callbackThrows() {
    try (Session s = model.newSession()) {
      RuntimeException boom = new RuntimeException("boom");
      try {
        s.generate("Once upon a time", greedy(64), p -> {
          throw boom;
        });
        throw new AssertionError("no exception");
      } catch (RuntimeException e) {
        check(e == boom, "not the callback's exception: " + e);
      }
      // The session is usable afterwards.
      equal(4, s.generate("Once", greedy(4), p -> true).generatedTokens, "generated after the exception");
    }
  }

  static void cancels() throws Exception {
    try (Session s = model.newSession()) {
      int max = s.contextSize() - 16;
      CountDownLatch started = new CountDownLatch(1);
      AtomicInteger afterCancel = new AtomicInteger();
      AtomicInteger cancelled = new AtomicInteger();
      AtomicReference<Stats> result = new AtomicReference<>();
      AtomicReference<Throwable> error = new AtomicReference<>();
      Thread worker = new Thread(() -> {
        try {
          result.set(s.generate("Once upon a time", greedy(max), p -> {
            started.countDown();
            if (cancelled.get() == 1) afterCancel.incrementAndGet();
            // Slow the stream down so the cancel surely lands mid-generation.
            try {
              Thread.sleep(2);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return true;
          }));
        } catch (Throwable e) {
          error.set(e);
        }
      });
      worker.start();
      check(started.await(30, TimeUnit.SECONDS), "no piece within 30 s");
      s.cancel();
      cancelled.set(1);
      worker.join(30000);
      check(!worker.isAlive(), "generate did not return after cancel");
      if (error.get() != null) throw new AssertionError("generate threw", error.get());
      Stats st = result.get();
      equal(StopReason.CANCELLED, st.stopReason, "stop reason");
      check(st.generatedTokens < max, "generated all " + max + " tokens");
      check(afterCancel.get() <= 1, afterCancel.get() + " pieces after cancel returned (at most one decode step)");
    }
  }

  static void tokenizes() {
    String text = "Once upon a time, there was a little dog.";
    int[] ids = model.tokenize(text);
    check(ids.length > 3 && ids.length < text.length(), "ids: " + ids.length);
    String back = model.detokenize(ids);
    check(back.equals(text) || back.equals(" " + text), "round trip: '" + back + "'");
    equal(0, model.tokenize("").length, "empty text");
    // Characters outside the BMP cross JNI as UTF-8 bytes (JNI's "modified UTF-8" would mangle them).
    String uni = "h\u00e9llo \uD83D\uDE00 world \u4E2D\u6587";
    String uniBack = model.detokenize(model.tokenize(uni));
    check(uniBack.equals(uni) || uniBack.equals(" " + uni), "round trip of " + uni + ": '" + uniBack + "'");
    try {
      model.detokenize(new int[] {model.info().vocabSize + 5});
      throw new AssertionError("an id outside the vocabulary was accepted");
    } catch (PocketException e) {
      equal(PocketException.Status.INVALID_ARGUMENT, e.status(), "status");
      check(!e.getMessage().isEmpty(), "empty message");
    }
  }

  static void twoSessions() throws Exception {
    try (Session a = model.newSession(); Session b = model.newSession()) {
      String[] out = new String[2];
      Thread t = new Thread(() -> out[1] = b.generate("Once upon a time", greedy(32)));
      t.start();
      out[0] = a.generate("Once upon a time", greedy(32));
      t.join();
      equal(out[0], out[1], "two sessions generating at once");
      // Another conversation on one session leaves the other's cache alone.
      a.generate("The little dog", greedy(8));
      equal(out[0], b.generate("Once upon a time", greedy(32)), "b after a moved on");
      check(a.lastStats().contextUsed != b.lastStats().contextUsed, "contexts " + a.lastStats().contextUsed);
    }
  }

  static void chat() {
    try (Session s = model.newSession()) {
      s.chat("Tell me a story.", greedy(8));
      Stats first = s.lastStats();
      s.chat("And then?", greedy(8));
      Stats second = s.lastStats();
      check(second.reusedTokens >= first.contextUsed - 1, "second turn reused " + second.reusedTokens);
    }
  }

  static void savedSession() throws Exception {
    String expected;
    try (Session whole = model.newSession()) {
      whole.chat("Tell me a story.", greedy(10));
      expected = whole.chat("And then?", greedy(10));
    }
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("pocket-java-state");
    try {
      String state = dir.resolve("chat.state").toString();
      try (Session first = model.newSession()) {
        first.chat("Tell me a story.", greedy(10));
        first.saveState(state);
      }
      try (Session second = model.newSession()) {
        second.loadState(state);
        equal(expected, second.chat("And then?", greedy(10)), "reply after loading");
        java.nio.file.Path bad = dir.resolve("bad.state");
        java.nio.file.Files.write(bad, java.util.Arrays.copyOf(java.nio.file.Files.readAllBytes(dir.resolve("chat.state")), 40));
        try {
          second.loadState(bad.toString());
          throw new AssertionError("a truncated state loaded");
        } catch (PocketException e) {
          check(e.getMessage().contains("bad.state: truncated"), "message: " + e.getMessage());
        }
      }
    } finally {
      try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.list(dir)) {
        for (java.nio.file.Path f : (Iterable<java.nio.file.Path>) files::iterator) java.nio.file.Files.delete(f);
      }
      java.nio.file.Files.delete(dir);
    }
  }

  static void sharedChatStart() {
    String system = "You are a teller of short stories about a small dog and a red ball. ".repeat(4);
    SessionOptions o = new SessionOptions().systemPrompt(system);
    String expected;
    try (Session plain = model.newSession(o)) {
      expected = plain.chat("Tell me a story.", greedy(10));
    }
    try (Session src = model.newSession(o); Session a = model.newSession(o); Session b = model.newSession(o)) {
      src.shareChatStart(a, b);
      equal(expected, a.chat("Tell me a story.", greedy(10)), "first target's reply");
      check(a.lastStats().reusedTokens > 10, "the shared prefix was prefilled again: reused " + a.lastStats().reusedTokens);
      equal(expected, b.chat("Tell me a story.", greedy(10)), "second target's reply");
    }
  }

  static void memoryBudget() {
    try {
      model.newSession(new SessionOptions().memBudgetMb(1));
      throw new AssertionError("a 1 MiB budget was accepted");
    } catch (PocketException e) {
      equal(PocketException.Status.INVALID_ARGUMENT, e.status(), "status");
      check(e.getMessage().contains("too small"), "message: " + e.getMessage());
    }
    try (Session s = model.newSession(new SessionOptions().memBudgetMb(64).batch(16))) {
      check(s.contextSize() >= 64 && s.contextSize() <= 512, "context " + s.contextSize());
      check(s.kvCache().equals("f16"), "kv " + s.kvCache());
      check(!s.generate("Once upon a time", greedy(4)).isEmpty(), "no text");
    }
    try (Session s = model.newSession(new SessionOptions().kvCache("q8"))) {
      equal("q8", s.kvCache(), "kv cache");
      check(!s.generate("Once upon a time", greedy(4)).isEmpty(), "no text with q8");
    }
    try {
      model.newSession(new SessionOptions().kvCache("q3"));
      throw new AssertionError("KV cache type q3 was accepted");
    } catch (PocketException e) {
      equal(PocketException.Status.INVALID_ARGUMENT, e.status(), "status");
    }
  }

  static void closeTwice() {
    Pocket m = Pocket.open(modelPath);
    Session s = m.newSession();
    s.close();
    s.close();
    m.close();
    m.close();
    try {
      s.generate("x");
      throw new AssertionError("a closed session generated");
    } catch (IllegalStateException e) {
      check(e.getMessage().contains("closed"), e.getMessage());
    }
    try {
      m.newSession();
      throw new AssertionError("a closed model opened a session");
    } catch (IllegalStateException e) {
      check(e.getMessage().contains("closed"), e.getMessage());
    }
    s.cancel(); // harmless on a closed session
  }

  static void outlives() {
    Pocket m = Pocket.open(modelPath);
    try (Session s = m.newSession()) {
      m.close();
      equal(4, s.generate("Once", greedy(4), p -> true).generatedTokens, "generated after the model closed");
    }
  }

  static void progress() {
    List<Float> seen = new ArrayList<>();
    Pocket.open(modelPath, null, f -> seen.add(f)).close();
    check(!seen.isEmpty() && seen.get(seen.size() - 1) == 1.0f, "progress " + seen);
    for (int i = 1; i < seen.size(); i++) check(seen.get(i) >= seen.get(i - 1), "progress falls: " + seen);
    try {
      Pocket.open(modelPath, null, f -> false);
      throw new AssertionError("loading did not stop");
    } catch (PocketException e) {
      equal(PocketException.Status.CANCELLED, e.status(), "status");
    }
    IllegalStateException mine = new IllegalStateException("from the callback");
    try {
      Pocket.open(modelPath, null, f -> {
        throw mine;
      });
      throw new AssertionError("loading did not stop");
    } catch (IllegalStateException e) {
      check(e == mine, "not the callback's exception: " + e);
    }
  }

  static void badPath() {
    String path = "/nonexistent/dir/model-\u00e9\uD83D\uDE00.gguf";
    try {
      Pocket.open(path);
      throw new AssertionError("opened " + path);
    } catch (PocketException e) {
      equal(PocketException.Status.MODEL, e.status(), "status");
      check(e.getMessage().contains(path), "message does not name the file: " + e.getMessage());
    }
  }

  static void badOptions() {
    try (Session s = model.newSession()) {
      try {
        s.generate("Once", new GenerateOptions().temperature(-1f));
        throw new AssertionError("temperature -1 accepted");
      } catch (PocketException e) {
        equal(PocketException.Status.INVALID_ARGUMENT, e.status(), "status");
        check(e.getMessage().contains("temperature"), "message: " + e.getMessage());
      }
      try {
        model.newSession(new SessionOptions().context(-5));
        throw new AssertionError("context -5 accepted");
      } catch (PocketException e) {
        equal(PocketException.Status.INVALID_ARGUMENT, e.status(), "status");
      }
    }
  }

  // docs/embedding.md's Java example, compiled with the tests: it must run and print text.
  static void runExample(String className) throws Exception {
    java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
    java.io.PrintStream old = System.out;
    System.setOut(new java.io.PrintStream(buf, true, "UTF-8"));
    try {
      Class.forName(className).getMethod("main", String[].class).invoke(null, (Object) new String[] {modelPath});
    } finally {
      System.setOut(old);
    }
    String out = buf.toString("UTF-8");
    check(out.startsWith("Once upon a time") && out.length() > 30, "example printed: " + out);
  }
}
