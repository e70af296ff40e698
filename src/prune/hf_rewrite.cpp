#include "prune/hf_rewrite.h"

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_cursor.h"
#include "util/mapped_file.h"

namespace pocket::prune {
namespace {

using ojson = nlohmann::ordered_json;

ojson parse_value(std::string_view text, const std::string& source) {
  try {
    return ojson::parse(text);
  } catch (const ojson::exception& e) {
    fail(source, ": invalid JSON: ", e.what());
  }
}

ojson parse(std::string_view text, const std::string& source) {
  ojson j = parse_value(text, source);
  if (!j.is_object()) fail(source, ": top level is not an object");
  return j;
}

int32_t new_id(const PrunedVocab& p, const ojson& id, const std::string& source, const std::string& field) {
  if (!id.is_number_integer()) fail(source, ": ", field, ": id is not an integer");
  const int64_t old = id.get<int64_t>();
  if (old < 0 || static_cast<uint64_t>(old) >= p.old_to_new.size())
    fail(source, ": ", field, ": id ", old, " is outside the vocabulary");
  return p.old_to_new[static_cast<size_t>(old)];
}

// TemplateProcessing and friends name special tokens with their ids.
void remap_post_processor(ojson& node, const PrunedVocab& p, const std::string& source) {
  if (node.is_array()) {
    for (auto& e : node) remap_post_processor(e, p, source);
    return;
  }
  if (!node.is_object()) return;
  if (auto st = node.find("special_tokens"); st != node.end() && st->is_object()) {
    for (auto& [name, tok] : st->items()) {
      auto ids = tok.find("ids");
      if (ids == tok.end() || !ids->is_array()) continue;
      for (auto& id : *ids) {
        const int32_t n = new_id(p, id, source, "post_processor.special_tokens." + name);
        if (n < 0) fail(source, ": post_processor special token \"", name, "\" was dropped");
        id = n;
      }
    }
  }
  for (auto& [k, v] : node.items())
    if (k != "special_tokens") remap_post_processor(v, p, source);
}

// One span of the original text and what replaces it.
struct Edit {
  size_t begin, end;
  std::string text;
};

// An object or array value at the cursor rewritten member by member:
// `item(index_or_key)` returns the new text of one entry (key included for
// objects), or "" to drop it. The layout around the entries (the
// whitespace after the opening bracket and before the closing one) is kept.
template <bool kObject, class Each>
Edit rewrite_container(JsonCursor& c, std::string_view text, Each&& item) {
  Edit e{c.offset(), 0, {}};
  bool any = false;
  std::vector<std::string> kept;
  auto one = [&](auto&& key) {
    any = true;
    std::string t = item(key);
    if (!t.empty()) kept.push_back(std::move(t));
  };
  if constexpr (kObject) {
    // members() reads the key before calling back; the entry starts at it.
    c.members([&](const std::string& key) { one(key); });
  } else {
    c.elements([&](size_t i) { one(i); });
  }
  e.end = c.offset();
  const std::string_view whole = text.substr(e.begin, e.end - e.begin);
  if (!any) {
    e.text = std::string(whole);
    return e;
  }
  // Whitespace after the opening bracket (repeated after each comma) and
  // before the closing one.
  size_t open_ws_end = 1;
  while (open_ws_end < whole.size() && static_cast<unsigned char>(whole[open_ws_end]) <= ' ') ++open_ws_end;
  const std::string_view ws = whole.substr(1, open_ws_end - 1);
  e.text.assign(whole.substr(0, 1)).append(ws);
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i) e.text.append(",").append(ws);
    e.text.append(kept[i]);
  }
  size_t close_ws = whole.size() - 1;
  while (close_ws > 0 && static_cast<unsigned char>(whole[close_ws - 1]) <= ' ') --close_ws;
  e.text.append(whole.substr(close_ws));
  return e;
}

}  // namespace

std::string rewrite_tokenizer_json(std::string_view original, const PrunedVocab& p, const std::string& source) {
  // The original text is copied as it is except for the spans rewritten
  // here; the vocabulary (151K entries) is streamed, not parsed into a DOM.
  JsonCursor c(original, source);
  std::vector<Edit> edits;
  bool saw_vocab = false, saw_merges = false;
  c.members([&](const std::string& key) {
    if (key == "model" && c.peek() == '{') {
      c.members([&](const std::string& k) {
        if (k == "vocab" && c.peek() == '{') {
          saw_vocab = true;
          edits.push_back(rewrite_container<true>(c, original, [&](const std::string& piece) {
            int64_t id;
            if (const char* problem = c.read_integer(id)) fail(source, ": model.vocab[\"", piece, "\"]: ", problem);
            const int32_t n = new_id(p, ojson(id), source, "model.vocab[\"" + piece + "\"]");
            return n < 0 ? std::string() : ojson(piece).dump() + ": " + std::to_string(n);
          }));
        } else if (k == "merges" && c.peek() == '[') {
          saw_merges = true;
          edits.push_back(rewrite_container<false>(c, original, [&](size_t r) {
            const std::string_view span = c.skip_value();
            if (r >= p.merge_kept.size())
              fail(source, ": model.merges has more entries than the vocabulary (", p.merge_kept.size(), ")");
            return p.merge_kept[r] ? std::string(span) : std::string();
          }));
        } else {
          c.skip_value();
        }
      });
    } else if (key == "added_tokens" && c.peek() == '[') {
      c.elements([&](size_t i) {
        const std::string field = "added_tokens[" + std::to_string(i) + "]";
        if (c.peek() != '{') fail(source, ": ", field, ": not an object");
        c.members([&](const std::string& k) {
          if (k != "id") {
            c.skip_value();
            return;
          }
          c.peek();  // the value starts after the whitespace
          const size_t at = c.offset();
          const std::string_view span = c.skip_value();
          const int32_t n = new_id(p, ojson::parse(span), source, field + ".id");
          if (n < 0) fail(source, ": ", field, " was dropped (added tokens are always kept)");
          edits.push_back({at, at + span.size(), std::to_string(n)});
        });
      });
    } else if (key == "post_processor") {
      c.peek();
      const size_t at = c.offset();
      const std::string_view span = c.skip_value();
      ojson pp = parse_value(span, source + ": post_processor");
      const ojson before = pp;
      remap_post_processor(pp, p, source);
      if (pp != before) edits.push_back({at, at + span.size(), pp.dump(2)});
    } else {
      c.skip_value();
    }
  });
  if (!saw_vocab) fail(source, ": model.vocab: missing or not an object");
  if (!saw_merges) fail(source, ": model.merges: missing or not an array");
  std::string out;
  out.reserve(original.size());
  size_t pos = 0;
  for (const Edit& e : edits) {  // in text order: the walk is forward-only
    out.append(original.substr(pos, e.begin - pos)).append(e.text);
    pos = e.end;
  }
  out.append(original.substr(pos));
  return out;
}

std::string rewrite_tokenizer_config(std::string_view original, const PrunedVocab& p, const std::string& source) {
  ojson j = parse(original, source);
  if (auto dec = j.find("added_tokens_decoder"); dec != j.end()) {
    if (!dec->is_object()) fail(source, ": added_tokens_decoder: not an object");
    ojson out = ojson::object();
    for (auto& [key, value] : dec->items()) {
      int64_t old = -1;
      try {
        size_t used = 0;
        old = std::stoll(key, &used);
        if (used != key.size()) old = -1;
      } catch (const std::exception&) {
      }
      if (old < 0) fail(source, ": added_tokens_decoder: key \"", key, "\" is not a token id");
      const int32_t n = new_id(p, ojson(old), source, "added_tokens_decoder[\"" + key + "\"]");
      if (n >= 0) out[std::to_string(n)] = std::move(value);
    }
    *dec = std::move(out);
  }
  return j.dump(2) + "\n";
}

std::vector<std::string> rewrite_tokenizer_side_files(const std::string& in_dir, const std::string& out_dir,
                                                      const PrunedVocab& p, std::vector<std::string>& not_carried) {
  std::vector<std::string> written;
  auto src = [&](const char* name) { return in_dir + "/" + name; };
  auto dst = [&](const char* name) { return out_dir + "/" + name; };
  auto write = [&](const char* name, const std::string& text) {
    write_file_atomically(dst(name), [&](std::ostream& o) { o << text; });
    written.emplace_back(name);
  };
  if (file_exists(src("special_tokens_map.json"))) write("special_tokens_map.json", read_text_file(src("special_tokens_map.json")));
  if (file_exists(src("added_tokens.json"))) {
    ojson j = parse(read_text_file(src("added_tokens.json")), src("added_tokens.json"));
    for (auto& [text, id] : j.items()) {
      const int32_t n = new_id(p, id, src("added_tokens.json"), "\"" + text + "\"");
      if (n < 0) fail(src("added_tokens.json"), ": \"", text, "\" was dropped (added tokens are always kept)");
      id = n;
    }
    write("added_tokens.json", j.dump(2) + "\n");
  }
  for (const char* name : {"vocab.json", "merges.txt"})
    if (file_exists(src(name))) not_carried.emplace_back(name);
  return written;
}

}  // namespace pocket::prune
