// pocket run: generate a continuation of one prompt.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "cli_common.h"
#include "constraint_flags.h"
#include "interrupt.h"
#include "memory_flags.h"
#include "speculative_cli.h"
#include "generate/chat.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  MemoryFlags memory;
  GenerationFlags flags;
  SpeculativeFlags speculative;
  std::string prompt = "Once upon a time";
  std::string prompt_file;
  bool chat = false;
  bool no_think = false;
  std::string system;
  ConstraintFlags constraint;
  bool mask_times = false;
};

void print_stats(const GenerateResult& r) {
  int prefilled = r.prompt_tokens - r.reused_tokens;
  double pp = r.prefill_seconds > 0 ? prefilled / r.prefill_seconds : 0;
  double tg = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  std::fprintf(stderr, "\n[prompt %d tokens (%d reused) %.1f tok/s | generated %zu tokens %.1f tok/s | stop: %s]\n",
               r.prompt_tokens, r.reused_tokens, pp, r.tokens.size(), tg,
               interrupted() ? "interrupted" : stop_reason_name(r.stop));
}

// With a constraint: whether the output is complete, and the mask times.
void print_constraint_stats(const GenerateResult& r, double compile_ms, bool all_times) {
  if (!r.constraint_complete)
    std::fprintf(stderr, "pocket: note: the output does not complete the constraint (stop: %s)\n", stop_reason_name(r.stop));
  if (!all_times) return;
  std::vector<float> t = r.mask_us;
  std::fprintf(stderr, "[constraint compile %.2f ms | mask us per token:", compile_ms);
  for (float x : t) std::fprintf(stderr, " %.1f", x);
  std::sort(t.begin(), t.end());
  if (!t.empty())
    std::fprintf(stderr, " | median %.1f p99 %.1f max %.1f]\n", t[t.size() / 2], t[std::min(t.size() - 1, t.size() * 99 / 100)],
                 t.back());
  else
    std::fprintf(stderr, "]\n");
}

int run(const RunOptions& o) {
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) prompt = o.prompt_file == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                                                           : read_text_file(o.prompt_file);
  if (o.memory.given() && o.speculative.enabled())
    fail_as(ErrorCode::InvalidArgument, "--mem-budget cannot be combined with speculative decoding (--draft) yet: its "
                                        "draft and verify buffers are not in the memory plan");
  LoadedModel m = o.memory.load(o.model);
  auto session_ptr = o.memory.session(m, o.model);
  Session& session = *session_ptr;
  std::vector<int32_t> input;
  if (o.chat) {
    ChatTemplate tmpl(m.chat_format);
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", prompt});
    ChatOptions co;
    co.enable_thinking = !o.no_think;
    if (m.tokenizer->vocab().add_bos && m.tokenizer->vocab().bos_id >= 0 && m.chat_format != ChatFormat::Llama3)
      input.push_back(m.tokenizer->vocab().bos_id);
    auto body = encode_pieces(*m.tokenizer, tmpl.render(msgs, co));
    input.insert(input.end(), body.begin(), body.end());
  } else {
    EncodeOptions eo;
    eo.add_bos = m.tokenizer->vocab().add_bos;
    input = m.tokenizer->encode(prompt, eo);
  }
  o.memory.check_prompt(input.size(), m);
  session.check_fits(input);  // before any output: an error is all the user sees
  GenerateOptions gen = o.flags.gen;
  double compile_ms = 0;
  if (o.constraint.given()) {  // compiled before any output too
    const auto t0 = std::chrono::steady_clock::now();
    gen.constraint = constrain::compile_constraint(o.constraint.spec(), *m.tokenizer);
    compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  auto drafter = o.speculative.enabled() ? o.speculative.make_drafter(session, input, gen) : nullptr;
  install_interrupt_handler();
  // Completion mode echoes the prompt, except under a constraint (stdout is
  // then only the constrained output).
  if (!o.chat && !gen.constraint) std::fputs(prompt.c_str(), stdout);
  auto print = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return !interrupted();
  };
  auto r = drafter ? o.speculative.generate(session, *drafter, input, gen, print, o.flags.quiet)
                   : session.generate(input, gen, print);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  if (!o.flags.quiet || interrupted()) print_stats(r);
  if (!o.flags.quiet) o.memory.report();
  if (gen.constraint) print_constraint_stats(r, compile_ms, o.mask_times);
  return interrupted() ? kInterruptedExit : 0;
}

}  // namespace

void add_run(CLI::App& app, int& rc) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Generate text from a prompt");
  o->model.add_to(*sub);
  o->memory.add_to(*sub);
  o->model.add_kv_to(*sub);
  o->flags.add_to(*sub);
  o->speculative.add_to(*sub);
  sub->add_option("-p,--prompt", o->prompt, "Prompt text (default: \"Once upon a time\")");
  sub->add_option("-f,--file", o->prompt_file, "Read the prompt from a file ('-' = stdin)");
  sub->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template as a user message");
  sub->add_option("--system", o->system, "System message (with --chat)");
  sub->add_flag("--no-think", o->no_think, "Qwen3 chat: disable thinking");
  o->constraint.add_to(*sub);
  sub->add_flag("--mask-times", o->mask_times, "With a constraint: print the compile time and each token's mask time");
  sub->callback([o, &rc] { rc = run(*o); });
}

}  // namespace pocket::cli
