// pocket chat: interactive multi-turn chat (a terminal or a pipe).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "interrupt.h"
#include "memory_flags.h"
#include "generate/chat_session.h"
#include "util/error.h"

namespace pocket::cli {

namespace {

struct ChatCliOptions {
  ModelOptions model;
  MemoryFlags memory;
  GenerationFlags flags;
  std::string system;
  bool no_think = false;
  std::string load_path, save_path;  // saved sessions
};

int chat(const ChatCliOptions& o) {
  LoadedModel m = o.memory.load(o.model);
  const bool tty = isatty(STDIN_FILENO);
  if (!m.chat_template_recognised)
    std::fprintf(stderr, "pocket: note: the model's chat template is not one Pocket renders; using %s\n",
                 chat_format_name(m.chat_format));
  auto session_ptr = o.memory.session(m, o.model);
  Session& session = *session_ptr;
  auto chat = std::make_unique<ChatSession>(session, ChatTemplate(m.chat_format), o.system, !o.no_think);
  if (!o.load_path.empty()) {
    chat->resume(session.load_state(o.load_path));
    if (!o.flags.quiet)
      std::fprintf(stderr, "pocket: resumed %s (%zu tokens of conversation, %zu cached)\n", o.load_path.c_str(),
                   chat->tokens().size(), session.cached_tokens().size());
  }
  if (tty) std::fprintf(stderr, "Chat with %s (%s template). /reset starts over, /exit or Ctrl-D quits.\n",
                        m.file->path.c_str(), chat_format_name(m.chat_format));
  install_interrupt_handler();
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;  // end of input, or Ctrl-C while waiting for it
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      session.reset();
      chat = std::make_unique<ChatSession>(session, ChatTemplate(m.chat_format), o.system, !o.no_think);
      continue;
    }
    if (line.empty()) continue;
    GenerateResult r;
    try {
      r = chat->send(line, o.flags.gen, [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return !interrupted();
      });
    } catch (const Error& e) {
      // A turn that does not fit is reported; the conversation continues.
      std::fprintf(stderr, "\npocket: error: %s\n", e.what());
      if (!tty) return 1;
      continue;
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!o.save_path.empty()) session.save_state(o.save_path, chat->tokens());
    if (!o.flags.quiet || interrupted())
      std::fprintf(stderr, "[%d new prompt tokens, %d reused | %zu generated, %.1f tok/s%s]\n",
                   r.prompt_tokens - r.reused_tokens, r.reused_tokens, r.tokens.size(),
                   r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0.0,
                   interrupted() ? " | interrupted" : "");
    if (interrupted()) break;
  }
  if (!o.flags.quiet) o.memory.report();
  if (interrupted()) {
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fputs("pocket: interrupted\n", stderr);
    return kInterruptedExit;
  }
  return 0;
}

}  // namespace

void add_chat(CLI::App& app, int& rc) {
  auto o = std::make_shared<ChatCliOptions>();
  CLI::App* sub = app.add_subcommand("chat", "Interactive multi-turn chat (reads turns line by line from stdin)");
  o->model.add_to(*sub);
  o->memory.add_to(*sub);
  o->model.add_kv_to(*sub);
  o->flags.add_to(*sub);
  sub->add_option("--system", o->system, "System message");
  sub->add_flag("--no-think", o->no_think, "Qwen3: disable thinking");
  sub->add_option("--load", o->load_path, "Resume the conversation saved in FILE (same model and context large enough)");
  sub->add_option("--save", o->save_path, "Save the conversation and its KV cache to FILE after every turn");
  sub->callback([o, &rc] { rc = chat(*o); });
}

}  // namespace pocket::cli
