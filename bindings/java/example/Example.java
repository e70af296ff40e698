import dev.pocket.GenerateOptions;
import dev.pocket.Pocket;
import dev.pocket.PocketException;
import dev.pocket.Session;
import dev.pocket.Stats;

public class Example {
  public static void main(String[] args) {
    try (Pocket model = Pocket.open(args[0]);
         Session session = model.newSession()) {
      GenerateOptions options = new GenerateOptions().maxTokens(48).temperature(0f);
      System.out.print("Once upon a time");
      Stats stats = session.generate("Once upon a time", options, piece -> {
        System.out.print(piece);  // whole UTF-8 characters, as they come
        return true;              // false stops; session.cancel() works from any thread
      });
      System.out.println();
      System.err.println(stats);
    } catch (PocketException e) {
      System.err.println("pocket: " + e.getMessage() + " (" + e.status() + ")");
    }
  }
}
