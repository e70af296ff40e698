#include "tokenizer/hf_json.h"

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/hash_tables.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/json_cursor.h"
#include "util/mapped_file.h"

namespace pocket {
namespace {

using json = nlohmann::json;

// model.vocab and model.merges of a tokenizer.json: 151K entries each in a
// real file, streamed straight out of the text (a DOM of them is most of the
// load time).
struct BigSections {
  bool has_vocab = false;
  std::vector<std::pair<std::string, int64_t>> vocab;  // in file order
  bool has_merges = false;
  std::vector<std::pair<std::string, std::string>> merges;
};

// Typed access that names the file and field on failure.
class Doc {
 public:
  // The whole text as a DOM (tokenizer_config.json, small documents).
  Doc(std::string_view text, std::string source) : source_(std::move(source)) {
    try {
      root_ = json::parse(text);
    } catch (const json::exception& e) {
      fail(source_, ": invalid JSON: ", e.what());
    }
    if (!root_.is_object()) fail(source_, ": top level is not an object");
  }
  // A tokenizer.json: everything as a DOM except model.vocab and
  // model.merges, which go to `big`.
  Doc(std::string_view text, std::string source, BigSections& big) : source_(std::move(source)) {
    JsonCursor c(text, source_);
    if (c.peek() != '{') {
      *this = Doc(text, source_);  // reports invalid JSON or a non-object
      return;
    }
    root_ = json::object();
    // Real files hold ~60-75 bytes of text per vocab entry and merge; a
    // capped guess saves the copies of repeated growth.
    const size_t guess = std::min<size_t>(text.size() / 64, size_t{1} << 18);
    big.vocab.reserve(guess);
    big.merges.reserve(guess);
    c.members([&](const std::string& key) {
      if (key != "model" || c.peek() != '{') {
        root_[key] = dom(c);
        return;
      }
      if (root_.contains("model")) c.error("\"model\" appears twice");
      json model = json::object();
      c.members([&](const std::string& k) {
        if (k == "vocab" && c.peek() == '{') {
          if (big.has_vocab) c.error("\"model.vocab\" appears twice");
          big.has_vocab = true;
          stream_vocab(c, big.vocab);
        } else if (k == "merges" && c.peek() == '[') {
          if (big.has_merges) c.error("\"model.merges\" appears twice");
          big.has_merges = true;
          stream_merges(c, big.merges);
        } else {
          model[k] = dom(c);
        }
      });
      root_["model"] = std::move(model);
    });
    if (!c.at_end()) c.error("text after the top-level object");
  }
  const json& root() const { return root_; }
  const std::string& source() const { return source_; }
  [[noreturn]] void error(const std::string& field, const std::string& problem) const {
    fail(source_, ": ", field, ": ", problem);
  }
  const json& object(const json& parent, const char* key, const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || !it->is_object()) error(field, "missing or not an object");
    return *it;
  }
  std::string string(const json& j, const std::string& field) const {
    if (!j.is_string()) error(field, "not a string");
    return j.get<std::string>();
  }
  bool boolean(const json& parent, const char* key, bool fallback, const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) error(field + "." + key, "not a boolean");
    return it->get<bool>();
  }
  std::string type_of(const json& j, const std::string& field) const {
    auto it = j.find("type");
    if (it == j.end()) error(field, "has no \"type\"");
    return string(*it, field + ".type");
  }

 private:
  // The next value, parsed as a DOM.
  json dom(JsonCursor& c) const {
    const size_t at = c.offset();
    const std::string_view span = c.skip_value();
    try {
      return json::parse(span);
    } catch (const json::exception& e) {
      c.error_at(at, e.what());
    }
  }
  void stream_vocab(JsonCursor& c, std::vector<std::pair<std::string, int64_t>>& out) const {
    c.members([&](const std::string& piece) {
      int64_t id;
      if (const char* problem = c.read_integer(id))
        error("model.vocab[\"" + piece + "\"]", std::string("bad id: ") + problem);
      out.emplace_back(piece, id);
    });
  }
  void stream_merges(JsonCursor& c, std::vector<std::pair<std::string, std::string>>& out) const {
    std::string s, b;
    c.elements([&](size_t i) {
      auto field = [&] { return "model.merges[" + std::to_string(i) + "]"; };
      auto not_a_pair = [&] { error(field(), "neither \"a b\" nor [a, b]"); };
      const char p = c.peek();
      if (p == '"') {
        c.read_string(s);
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
          error(field(), "\"" + s + "\" is not two tokens separated by one space");
        out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        return;
      }
      // [a, b]
      if (!c.consume('[') || c.peek() != '"') not_a_pair();
      c.read_string(s);
      if (!c.consume(',') || c.peek() != '"') not_a_pair();
      c.read_string(b);
      if (!c.consume(']')) not_a_pair();
      out.emplace_back(s, b);
    });
  }

  std::string source_;
  json root_;
};

bool parse_normalizer(const Doc& d, const json& n, const std::string& field) {
  if (n.is_null()) return false;
  if (!n.is_object()) d.error(field, "not an object");
  const std::string type = d.type_of(n, field);
  if (type == "NFC") return true;
  if (type == "Sequence") {
    auto it = n.find("normalizers");
    if (it == n.end() || !it->is_array()) d.error(field + ".normalizers", "missing or not an array");
    bool nfc = false;
    for (size_t i = 0; i < it->size(); ++i) nfc |= parse_normalizer(d, (*it)[i], field + ".normalizers[" + std::to_string(i) + "]");
    return nfc;
  }
  d.error(field, "unsupported normalizer \"" + type + "\" (Pocket supports NFC, a Sequence of NFC, or null)");
}

void parse_pre_tokenizer(const Doc& d, const json& p, Vocab& v) {
  const std::string field = "pre_tokenizer";
  if (!p.is_object()) d.error(field, "missing or not an object (Pocket needs a byte-level pre-tokenizer)");
  const std::string type = d.type_of(p, field);
  auto byte_level = [&](const json& b, const std::string& f, bool standalone) {
    if (d.type_of(b, f) != "ByteLevel") d.error(f, "unsupported pre-tokenizer \"" + d.type_of(b, f) + "\"");
    const bool use_regex = d.boolean(b, "use_regex", true, f);
    const bool prefix = d.boolean(b, "add_prefix_space", true, f);
    if (standalone) {
      v.pre = use_regex ? PreTokenizer::GPT2 : PreTokenizer::None;
      v.add_space_prefix = prefix;
    } else if (use_regex || prefix) {
      d.error(f, "ByteLevel after a Split must have use_regex and add_prefix_space false");
    }
  };
  if (type == "ByteLevel") return byte_level(p, field, true);
  if (type != "Sequence") d.error(field, "unsupported pre-tokenizer \"" + type + "\"");
  auto it = p.find("pretokenizers");
  if (it == p.end() || !it->is_array() || it->size() != 2)
    d.error(field, "unsupported pre-tokenizer Sequence (Pocket supports [Split(Regex), ByteLevel])");
  const json& split = (*it)[0];
  const std::string sf = field + ".pretokenizers[0]";
  if (d.type_of(split, sf) != "Split") d.error(sf, "unsupported pre-tokenizer \"" + d.type_of(split, sf) + "\"");
  auto pat = split.find("pattern");
  if (pat == split.end() || !pat->is_object() || !pat->contains("Regex"))
    d.error(sf + ".pattern", "missing or not a {\"Regex\": ...} object");
  const std::string regex = d.string((*pat)["Regex"], sf + ".pattern.Regex");
  auto kind = pretokenizer_from_regex(regex);
  if (!kind) d.error(sf + ".pattern.Regex", "unsupported pre-tokenizer regex: " + regex);
  auto behavior = split.find("behavior");
  if (behavior == split.end() || d.string(*behavior, sf + ".behavior") != "Isolated" ||
      d.boolean(split, "invert", false, sf))
    d.error(sf, "unsupported Split (Pocket supports behavior Isolated, invert false)");
  v.pre = *kind;
  byte_level((*it)[1], field + ".pretokenizers[1]", false);
}

void parse_decoder(const Doc& d, const json& dec) {
  if (dec.is_null()) return;
  if (!dec.is_object()) d.error("decoder", "not an object");
  const std::string type = d.type_of(dec, "decoder");
  if (type != "ByteLevel") d.error("decoder", "unsupported decoder \"" + type + "\" (Pocket supports ByteLevel)");
}

// A token named in tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> config_token(const Doc& d, const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return d.string((*it)["content"], std::string(key) + ".content");
  d.error(key, "neither a string nor an object with \"content\"");
}

int32_t find_token(const Vocab& v, const std::string& text) {
  for (size_t i = v.tokens.size(); i-- > 0;)  // added tokens sit at the end
    if (v.tokens[i] == text) return static_cast<int32_t>(i);
  return -1;
}

void apply_config(const Doc& d, Vocab& v, std::string* chat_template) {
  const json& cfg = d.root();
  auto id_of = [&](const char* key) {
    auto text = config_token(d, cfg, key);
    if (!text) return -1;
    const int32_t id = find_token(v, *text);
    if (id < 0) d.error(key, "token \"" + *text + "\" is not in the vocabulary");
    return id;
  };
  v.bos_id = id_of("bos_token");
  v.eos_id = id_of("eos_token");
  v.pad_id = id_of("pad_token");
  if (int32_t unk = id_of("unk_token"); unk >= 0) v.unk_id = unk;
  v.add_bos = d.boolean(cfg, "add_bos_token", false, "tokenizer_config") && v.bos_id >= 0;
  if (chat_template) {
    auto it = cfg.find("chat_template");
    if (it != cfg.end() && it->is_string()) {
      *chat_template = it->get<std::string>();
    } else if (it != cfg.end() && it->is_array()) {  // [{"name": ..., "template": ...}]
      for (const auto& t : *it)
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template"))
          *chat_template = d.string(t["template"], "chat_template.template");
    }
  }
}

// Tokenizer::create validates too, but errors found here can name the file
// and the JSON field.
// Also records the merges' token ids in v.merge_ids.
void check_pieces(const Doc& d, Vocab& v) {
  std::vector<int32_t> all(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    all[i] = static_cast<int32_t>(i);
    if (v.types[i] != TokenType::Normal) continue;
    const std::string& t = v.tokens[i];
    for (size_t k = 0; k < t.size();) {
      size_t len;
      if (byte_level::cp_to_byte(unicode::decode(t, k, len)) < 0)
        d.error("model.vocab[\"" + t + "\"]", "has a character outside the byte-level alphabet");
      k += len;
    }
  }
  tok_detail::StringIdMap ids;
  ids.build(&v.tokens, all);
  std::string joined;
  v.merge_ids.resize(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto& [a, b] = v.merges[r];
    joined.assign(a).append(b);
    auto& m = v.merge_ids[r];
    m = {ids.find(a), ids.find(b), ids.find(joined)};
    if (m[0] < 0 || m[1] < 0 || m[2] < 0)
      d.error("model.merges[" + std::to_string(r) + "]",
              "\"" + a + " " + b + "\" refers to a token not in the vocab");
  }
}

}  // namespace

Vocab vocab_from_hf_json_text(std::string_view tokenizer_json, const std::string& tokenizer_config,
                              const std::string& source, std::string* chat_template) {
  if (chat_template) chat_template->clear();
  BigSections big;
  const Doc d(tokenizer_json, source, big);
  const json& root = d.root();
  const json& model = d.object(root, "model", "model");
  const std::string type = model.contains("type") ? d.type_of(model, "model") : "BPE";
  if (type != "BPE") d.error("model.type", "unsupported model type \"" + type + "\" (Pocket supports BPE)");
  if (d.boolean(model, "byte_fallback", false, "model"))
    d.error("model.byte_fallback", "SentencePiece-style tokenizer.json is not supported; use GGUF or tokenizer.bin");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(k);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      d.error(std::string("model.") + k, "unsupported (must be empty)");
  }
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0))
    d.error("model.dropout", "unsupported (must be null)");

  Vocab v;
  v.kind = TokenizerKind::ByteLevelBPE;
  v.ignore_merges = d.boolean(model, "ignore_merges", false, "model");
  if (!big.has_vocab) d.error("model.vocab", "missing or not an object");
  auto added = root.find("added_tokens");
  if (added != root.end() && !added->is_null() && !added->is_array()) d.error("added_tokens", "not an array");
  const size_t n_added = added != root.end() && added->is_array() ? added->size() : 0;
  // Ids must be dense-ish: bound them by the entry count before allocating.
  const size_t max_entries = big.vocab.size() + n_added;
  // The field name is built only for the error (151K vocab entries pass).
  auto check_id = [&](int64_t id, const auto& field) {
    if (id < 0 || static_cast<uint64_t>(id) >= 2 * max_entries + 1024)
      d.error(field(), "id " + std::to_string(id) + " is out of range for " + std::to_string(max_entries) + " entries");
    return static_cast<size_t>(id);
  };
  size_t n = 0;
  for (const auto& e : big.vocab)
    n = std::max(n, check_id(e.second, [&] { return "model.vocab[\"" + e.first + "\"]"; }) + 1);
  if (n_added)
    for (size_t i = 0; i < n_added; ++i) {
      const json& a = (*added)[i];
      const std::string f = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object() || !a.contains("id")) d.error(f, "not an object with an id");
      if (!a["id"].is_number_integer()) d.error(f + ".id", "id is not an integer");
      n = std::max(n, check_id(a["id"].get<int64_t>(), [&] { return f + ".id"; }) + 1);
    }
  v.tokens.assign(n, std::string());
  v.types.assign(n, TokenType::Unused);
  for (auto& [piece, id] : big.vocab) {
    if (v.types[id] != TokenType::Unused) d.error("model.vocab", "id " + std::to_string(id) + " is used twice");
    v.tokens[id] = std::move(piece);
    v.types[id] = TokenType::Normal;
  }
  for (size_t i = 0; i < n_added; ++i) {
    const json& a = (*added)[i];
    const std::string f = "added_tokens[" + std::to_string(i) + "]";
    const size_t id = a["id"].get<size_t>();
    if (!a.contains("content")) d.error(f, "has no content");
    const std::string content = d.string(a["content"], f + ".content");
    if (content.empty()) d.error(f, "content is empty");
    for (const char* k : {"lstrip", "rstrip", "single_word"})
      if (d.boolean(a, k, false, f)) d.error(f, std::string(k) + " = true is not supported");
    if (v.types[id] == TokenType::Normal && v.tokens[id] != content)
      d.error(f, "id " + std::to_string(id) + " is already the vocab token \"" + v.tokens[id] + "\"");
    v.tokens[id] = content;
    v.types[id] = d.boolean(a, "special", false, f) ? TokenType::Control : TokenType::UserDefined;
  }

  if (!big.has_merges) d.error("model.merges", "missing or not an array");
  v.merges = std::move(big.merges);
  check_pieces(d, v);
  if (auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    v.unk_id = find_token(v, d.string(*unk, "model.unk_token"));
    if (v.unk_id < 0) d.error("model.unk_token", "not in the vocabulary");
  }

  auto norm = root.find("normalizer");
  v.nfc = norm != root.end() && parse_normalizer(d, *norm, "normalizer");
  auto pre = root.find("pre_tokenizer");
  parse_pre_tokenizer(d, pre == root.end() ? json() : *pre, v);
  auto dec = root.find("decoder");
  parse_decoder(d, dec == root.end() ? json() : *dec);

  if (!tokenizer_config.empty()) apply_config(Doc(tokenizer_config, source + " (tokenizer_config)"), v, chat_template);
  // Everything that ends a turn or a document stops generation.
  if (v.eos_id >= 0) v.eos_ids.push_back(v.eos_id);
  for (const char* t : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<end_of_turn>"}) {
    const int32_t id = find_token(v, t);
    if (id >= 0 && v.types[id] == TokenType::Control && std::find(v.eos_ids.begin(), v.eos_ids.end(), id) == v.eos_ids.end())
      v.eos_ids.push_back(id);
  }
  return v;
}

Vocab vocab_from_hf_json(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path,
                         std::string* chat_template) {
  std::string config = tokenizer_config_path.empty() ? std::string() : read_text_file(tokenizer_config_path);
  // Parsed in place from the page cache (no 11 MB copy for a real file).
  auto file = MappedFile::open(tokenizer_json_path);
  const std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  return vocab_from_hf_json_text(text, config, tokenizer_json_path, chat_template);
}

}  // namespace pocket
