// fuzz_chat: the chat-template detector and the native renderers. The input
// is split at the separator line of fuzz_util.h: part 0 = one option byte
// (bit 0 add_generation_prompt, bit 1 enable_thinking) followed by a Jinja
// chat template (as found in tokenizer_config.json / GGUF
// tokenizer.chat_template), parts 1..8 = messages, each "role\ncontent".
// detect_chat_format() runs on the template with the real Qwen3 tokenizer
// (which has <|im_start|>), with tok512 (which has not) and with the Qwen3
// vocabulary plus the Llama 3 and Gemma markers (fuzz_util.h's
// chat_tokenizer: an empty template then means Gemma) as load_model does;
// then every family (Qwen3, ChatML, Llama 3, Gemma, raw) renders the
// messages (whole conversation, single turns, generation prompt, end of
// reply) and encode_pieces() encodes them with chat_tokenizer as `pocket
// chat` does (a single turn whose text is inside the whole conversation's is
// not encoded again). Checked: message text never yields a control token, i.e. the
// encoding holds exactly one control token per special piece that names one.
// (Text may yield user-defined added tokens such as <think>: Hugging Face's
// tokenizer matches those in plain text too, and so does Pocket.)
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {  // the slow loads, outside the first input's time limit
  pocket::fuzz::qwen3_tokenizer();
  pocket::fuzz::tok512_tokenizer();
  pocket::fuzz::chat_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using namespace pocket::fuzz;
  const Tokenizer& qwen = qwen3_tokenizer();
  const Tokenizer& t512 = tok512_tokenizer();
  const Tokenizer& chat = chat_tokenizer();
  std::vector<std::string_view> parts = split_parts(data, size, 9);
  Bytes head(reinterpret_cast<const uint8_t*>(parts[0].data()), parts[0].size());
  const uint8_t flags = head.take_byte();
  const std::string jinja(head.rest());
  ChatOptions opt;
  opt.add_generation_prompt = flags & 1;
  opt.enable_thinking = flags & 2;
  std::vector<ChatMessage> msgs;
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].empty()) continue;
    const size_t nl = parts[i].find('\n');
    ChatMessage m;
    m.role = std::string(parts[i].substr(0, nl));
    if (nl != std::string_view::npos) m.content = std::string(parts[i].substr(nl + 1));
    msgs.push_back(std::move(m));
  }
  bool known = true;
  detect_chat_format(jinja, qwen, &known);
  detect_chat_format(jinja, t512, &known);
  detect_chat_format(jinja, chat, &known);
  // Every family renders (whatever was detected), so the renderers see every
  // message shape even when the template mutates into an unknown one.
  for (ChatFormat f : {ChatFormat::Qwen3, ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Gemma, ChatFormat::Raw}) {
    const ChatTemplate tmpl(f);
    std::vector<std::vector<ChatPiece>> renders;
    std::string whole;
    guarded([&] {
      renders.push_back(tmpl.render(msgs, opt));
      whole = pieces_text(renders.back());
    });
    // A single turn is rendered always but encoded only when its text is not
    // already part of the whole conversation's (encoding every message again
    // per family was half of this target's time; perf, docs/reliability.md).
    for (const ChatMessage& m : msgs)
      guarded([&] {
        std::vector<ChatPiece> turn = tmpl.message(m);
        if (renders.empty() || whole.find(pieces_text(turn)) == std::string::npos) renders.push_back(std::move(turn));
      });
    guarded([&] { renders.push_back(tmpl.generation_prompt(opt.enable_thinking)); });
    guarded([&] { renders.push_back(tmpl.end_of_reply()); });
    for (const auto& pieces : renders) {
      pieces_text(pieces);
      guarded([&] {
        const std::vector<int32_t> ids = encode_pieces(chat, pieces);  // every special piece has an id, or it threw
        auto is_control = [&](int32_t id) { return chat.vocab().types[static_cast<size_t>(id)] == TokenType::Control; };
        size_t specials = 0, controls = 0;
        for (const ChatPiece& p : pieces) specials += p.special && is_control(*chat.token_id(p.text));
        for (int32_t id : ids) controls += is_control(id);
        if (controls != specials)
          finding(cat(chat_format_name(f), ": ", controls, " control tokens for ", specials, " special pieces"));
      });
    }
  }
  return 0;
}
