/* A minimal app on Pocket's C API: open a model, stream a reply, cancel it
 * after N pieces of text.
 *
 *   pocket_example MODEL [N] [PROMPT]
 *
 * Build against an installed Pocket (CMake: find_package(Pocket), or
 * pkg-config: cc example.c $(pkg-config --cflags --libs pocket)). */
#include <pocket/pocket_c.h>
#include <stdio.h>
#include <stdlib.h>

struct stream_state {
  pocket_session* session;
  int pieces;
  int cancel_after;
};

static int on_text(const char* piece, size_t length, void* user_data) {
  struct stream_state* st = (struct stream_state*)user_data;
  fwrite(piece, 1, length, stdout);
  fflush(stdout);
  /* Any thread may cancel; here the stream does it itself after N pieces. */
  if (++st->pieces == st->cancel_after) pocket_session_cancel(st->session);
  return 0; /* 0 = keep going */
}

int main(int argc, char** argv) {
  pocket_model* model = NULL;
  pocket_session* session = NULL;
  pocket_generate_options opt;
  pocket_stats stats = {.struct_size = sizeof(pocket_stats)};
  struct stream_state st = {NULL, 0, 0};
  const char* prompt = argc > 3 ? argv[3] : "Once upon a time";

  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [N] [PROMPT]\n", argv[0]);
    return 2;
  }
  st.cancel_after = argc > 2 ? atoi(argv[2]) : 16;
  if (pocket_model_open(argv[1], NULL, &model) != POCKET_OK ||
      pocket_session_open(model, NULL, &session) != POCKET_OK) {
    fprintf(stderr, "error: %s\n", pocket_last_error());
    pocket_model_close(model); /* closing NULL is an error code, never a crash */
    return 1;
  }
  st.session = session;

  pocket_generate_options_init(&opt);
  opt.max_tokens = 1000;
  opt.temperature = 0; /* greedy: the same reply every run */
  fputs(prompt, stdout);
  if (pocket_session_generate(session, prompt, &opt, on_text, &st, &stats) != POCKET_OK) {
    fprintf(stderr, "error: %s\n", pocket_last_error());
    return 1;
  }
  printf("\n");
  fprintf(stderr, "pocket %s: %d pieces, %d tokens generated, stop: %s\n", pocket_version(), st.pieces,
          stats.generated_tokens, pocket_stop_reason_name(stats.stop_reason));

  pocket_session_close(session);
  pocket_model_close(model);
  return 0;
}
