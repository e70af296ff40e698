#include "prune/prune.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "generate/chat.h"
#include "formats/model_file.h"
#include "prune/hf_rewrite.h"
#include "prune/prune_model.h"
#include "prune/vocab_prune.h"
#include "tokenizer/hf_json.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::prune {
namespace {

namespace fs = std::filesystem;

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  if (fs::exists(a, ec1) && fs::exists(b, ec2)) return fs::equivalent(a, b, ec1);
  return fs::weakly_canonical(a, ec1) == fs::weakly_canonical(b, ec2);
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& o) { o.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

uint64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

std::string default_map_path(const std::string& out, bool folder) {
  if (folder) return (fs::path(out) / "vocab_map.json").string();
  fs::path p(out);
  p.replace_extension();
  return p.string() + ".vocab_map.json";
}

// --keep-tokens: each line is a token as spelled in the vocabulary (e.g.
// "Ġthe", "<tool_call>"), or else text whose tokens are all kept.
std::vector<int32_t> read_keep_tokens(const std::string& path, const Tokenizer& tok) {
  const Corpus lines = Corpus::read(path);
  std::vector<int32_t> ids;
  for (std::string_view line : lines.docs()) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (auto id = tok.token_id(line)) {
      ids.push_back(*id);
      continue;
    }
    for (int32_t id : tok.encode(line)) ids.push_back(id);
  }
  return ids;
}

std::string percent(double x, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.*f%%", digits, x * 100);
  return buf;
}
std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

std::vector<int32_t> chat_template_tokens(const Tokenizer& tok, const std::string& jinja) {
  // No template: the format the vocabulary implies (Gemma's turn markers), if any.
  const ChatFormat format = detect_chat_format(jinja, tok);
  if (jinja.empty() && format == ChatFormat::Raw) return {};
  const ChatTemplate tmpl(format);
  const std::vector<ChatMessage> convo = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "u"}};
  std::vector<int32_t> ids;
  for (bool thinking : {true, false}) {
    ChatOptions co;
    co.enable_thinking = thinking;
    const auto pieces = tmpl.render(convo, co);
    const auto part = encode_pieces(tok, pieces);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

PruneReport prune_vocab(const std::string& in, const std::string& out, const PruneOptions& opt) {
  if (opt.keep <= 0) fail("--keep: give the number of tokens to keep (a positive number)");
  if (opt.corpus.empty()) fail("--corpus: give at least one text file to count token use on");
  if (same_path(in, out)) fail("OUT (", out, ") is the input: pruning never overwrites its input");

  PruneReport r;
  r.input = in;
  r.output = out;
  r.keep = opt.keep;
  r.corpus = opt.corpus;
  // What IN is.
  enum class Kind { TokenizerFile, TokenizerFolder, HfModel, GgufModel } kind;
  std::string json_path, config_path, chat_template;
  Vocab vocab;
  if (is_directory(in)) {
    kind = file_exists(in + "/config.json") ? Kind::HfModel : Kind::TokenizerFolder;
    json_path = in + "/tokenizer.json";
    if (!file_exists(json_path)) fail(in, ": no tokenizer.json in this folder");
    if (file_exists(in + "/tokenizer_config.json")) config_path = in + "/tokenizer_config.json";
    r.kind = kind == Kind::HfModel ? "Hugging Face model folder" : "tokenizer folder";
  } else if (!file_exists(in)) {
    fail(in, ": no such file");
  } else if (fs::path(in).extension() == ".json") {
    kind = Kind::TokenizerFile;
    json_path = in;
    const std::string beside = (fs::path(in).parent_path() / "tokenizer_config.json").string();
    if (file_exists(beside)) config_path = beside;
    r.kind = "tokenizer.json";
  } else {
    kind = Kind::GgufModel;
    const ModelFile f = open_model(in);
    if (f.format != "gguf" && f.format != "pocket")
      fail(in, ": a ", f.format, " model; prune-vocab takes a GGUF or Pocket file, a Hugging Face folder or a tokenizer.json");
    vocab = f.vocab;
    chat_template = f.chat_template;
    r.kind = f.format == "pocket" ? "Pocket file" : "GGUF file";
  }
  const bool folder = kind == Kind::TokenizerFolder || kind == Kind::HfModel;
  if (folder && file_exists(out) && !is_directory(out)) fail(out, ": exists and is not a folder (IN is a folder)");
  if (!folder && is_directory(out)) fail(out, ": is a folder; give the file to write");
  if (folder && file_exists(out) && same_path(in, out))
    fail("OUT (", out, ") is the input: pruning never overwrites its input");

  r.map_path = opt.map_path.empty() ? default_map_path(out, folder) : opt.map_path;
  auto check_not_input = [&](const std::string& path, const char* option) {
    if (path.empty()) return;
    const fs::path parent = fs::path(path).parent_path();
    if (same_path(path, in) || (!json_path.empty() && same_path(path, json_path)) ||
        (!config_path.empty() && same_path(path, config_path)) || (folder && same_path(parent.empty() ? "." : parent, in)))
      fail(option, " (", path, ") is an input file: pruning never overwrites its input");
  };
  check_not_input(r.map_path, "--map");
  check_not_input(opt.report_path, "--report");
  if (!json_path.empty()) vocab = vocab_from_hf_json(json_path, config_path, &chat_template);
  if (vocab.kind == TokenizerKind::SentencePieceBPE && !json_path.empty())
    fail(in, ": a SentencePiece-style tokenizer.json; prune-vocab prunes SentencePiece BPE vocabularies in GGUF and "
             "Pocket model files only");
  if (vocab.kind != TokenizerKind::ByteLevelBPE && vocab.kind != TokenizerKind::SentencePieceBPE)
    fail(in, ": not a BPE tokenizer (prune-vocab needs a byte-level or SentencePiece BPE vocabulary)");
  const auto tok = Tokenizer::create(vocab);

  std::vector<Corpus> corpora;
  for (const auto& path : opt.corpus) corpora.push_back(Corpus::read(path));
  std::vector<Corpus> heldout;  // read (and checked) before the long count
  for (const auto& path : opt.heldout) heldout.push_back(Corpus::read(path));
  const auto counts =
      count_tokens(*tok, corpora, opt.threads, opt.progress ? terminal_count_progress("counting") : CountProgress{});

  SelectOptions so;
  so.keep = opt.keep;
  so.min_count = opt.min_count;
  if (!opt.keep_tokens.empty()) so.must_keep = read_keep_tokens(opt.keep_tokens, *tok);
  for (int32_t id : chat_template_tokens(*tok, chat_template)) so.must_keep.push_back(id);
  if (kind == Kind::HfModel || kind == Kind::GgufModel)
    for (int32_t id : model_token_ids(in, vocab.tokens.size())) so.must_keep.push_back(id);
  const auto parents = bpe_parents(vocab);
  const Selection sel = select_tokens(vocab, parents, counts, so);
  const PrunedVocab pruned = apply_selection(vocab, sel.kept);
  const auto pruned_tok = Tokenizer::create(pruned.vocab);

  // Outputs: the model or tokenizer file(s), then the id map.
  if (folder) fs::create_directories(out);
  if (kind == Kind::GgufModel) {
    write_pruned_gguf(in, out, pruned);
    r.files.push_back({fs::path(in).filename().string(), size_of(in), size_of(out)});
  } else {
    const std::string out_json = folder ? (fs::path(out) / "tokenizer.json").string() : out;
    auto file = MappedFile::open(json_path);
    const std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
    write_text(out_json, rewrite_tokenizer_json(text, pruned, json_path));
    r.files.push_back({"tokenizer.json", size_of(json_path), size_of(out_json)});
  }
  if (folder && !config_path.empty()) {
    const std::string out_config = (fs::path(out) / "tokenizer_config.json").string();
    write_text(out_config, rewrite_tokenizer_config(read_text_file(config_path), pruned, config_path));
    r.files.push_back({"tokenizer_config.json", size_of(config_path), size_of(out_config)});
  }
  if (folder) {
    std::vector<std::string> not_carried;
    for (const std::string& name : rewrite_tokenizer_side_files(in, out, pruned, not_carried))
      r.files.push_back({name, size_of(in + "/" + name), size_of(out + "/" + name)});
    for (const std::string& name : not_carried)
      r.notes.push_back(name + " (the old vocabulary's slow-tokenizer file) was not carried over; tokenizer.json holds "
                               "the pruned vocabulary");
  }
  if (kind == Kind::HfModel)
    for (const WrittenFile& f : write_pruned_hf_folder(in, out, pruned)) r.files.push_back({f.name, f.before, f.after});
  write_text(r.map_path, id_map_json(pruned));

  r.vocab_before = static_cast<int64_t>(vocab.tokens.size());
  r.vocab_after = static_cast<int64_t>(pruned.vocab.tokens.size());
  r.merges_before = static_cast<int64_t>(vocab.merges.size());
  r.merges_after = static_cast<int64_t>(pruned.vocab.merges.size());
  r.mandatory = sel.mandatory;
  r.from_counts = sel.from_counts;
  for (const Corpus& c : corpora) r.corpus_docs += c.docs().size();
  for (size_t i = 0; i < counts.size(); ++i) {
    r.corpus_tokens += counts[i];
    if (sel.kept[i]) r.corpus_kept_tokens += counts[i];
    r.distinct_seen += counts[i] > 0;
    r.distinct_seen_kept += counts[i] > 0 && sel.kept[i];
  }
  for (const Corpus& c : heldout)
    r.heldout.push_back({c.path(), compare_tokenizers(*tok, *pruned_tok, pruned.old_to_new, c, opt.threads)});
  const std::string& rp = opt.report_path;
  if (!rp.empty()) write_text(rp, rp.size() >= 5 && rp.compare(rp.size() - 5, 5, ".json") == 0 ? r.json() : r.markdown());
  return r;
}

std::string PruneReport::markdown() const {
  std::string s;
  s += "# Vocabulary pruning report\n\n";
  s += "- input: `" + input + "` (" + kind + ")\n- output: `" + output + "`\n- id map: `" + map_path + "`\n";
  s += "- vocabulary: " + std::to_string(vocab_before) + " -> " + std::to_string(vocab_after) + " tokens (--keep " +
       std::to_string(keep) + "; mandatory with ancestors " + std::to_string(mandatory) + ", chosen by count " +
       std::to_string(from_counts) + ")\n";
  s += "- merges: " + std::to_string(merges_before) + " -> " + std::to_string(merges_after) + "\n";
  s += "- counting corpus: " + std::to_string(corpus_docs) + " documents, " + std::to_string(corpus_tokens) +
       " tokens; coverage " + fixed(100.0 * static_cast<double>(corpus_kept_tokens) / std::max<uint64_t>(corpus_tokens, 1), 3) +
       "% of its tokens are kept; " + std::to_string(distinct_seen_kept) + " of the " + std::to_string(distinct_seen) +
       " distinct tokens seen are kept\n";
  for (const auto& c : corpus) s += "  - `" + c + "`\n";
  for (const auto& n : notes) s += "- note: " + n + "\n";
  if (!heldout.empty()) {
    s += "\n| held-out text | docs | chars | tokens before | tokens after | tokens/char before | tokens/char after | "
         "change | coverage | kept-only docs identical | round trip |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& h : heldout) {
      const CompareStats& c = h.stats;
      s += "| `" + h.path + "` | " + std::to_string(c.docs) + " | " + std::to_string(c.chars) + " | " +
           std::to_string(c.tokens_before) + " | " + std::to_string(c.tokens_after) + " | " +
           fixed(c.per_char(c.tokens_before), 4) + " | " + fixed(c.per_char(c.tokens_after), 4) + " | " +
           percent(c.change()) + " | " + fixed(100 * c.coverage(), 3) + "% | " +
           std::to_string(c.docs_all_kept_identical) + "/" + std::to_string(c.docs_all_kept) + " | " +
           std::to_string(c.docs_round_trip) + "/" + std::to_string(c.docs) + " |\n";
    }
  }
  s += "\n| file | before (bytes) | after (bytes) | change |\n|---|---|---|---|\n";
  for (const auto& f : files)
    s += "| " + f.name + " | " + std::to_string(f.before) + " | " + std::to_string(f.after) + " | " +
         percent(f.before ? static_cast<double>(f.after) / static_cast<double>(f.before) - 1 : 0, 1) + " |\n";
  return s;
}

std::string PruneReport::json() const {
  nlohmann::ordered_json j;
  j["input"] = input;
  j["kind"] = kind;
  j["output"] = output;
  j["id_map"] = map_path;
  j["keep"] = keep;
  j["vocab_before"] = vocab_before;
  j["vocab_after"] = vocab_after;
  j["mandatory"] = mandatory;
  j["chosen_by_count"] = from_counts;
  j["merges_before"] = merges_before;
  j["merges_after"] = merges_after;
  j["corpus"] = corpus;
  j["corpus_docs"] = corpus_docs;
  j["corpus_tokens"] = corpus_tokens;
  j["corpus_kept_tokens"] = corpus_kept_tokens;
  j["distinct_tokens_seen"] = distinct_seen;
  j["distinct_tokens_seen_kept"] = distinct_seen_kept;
  j["heldout"] = nlohmann::ordered_json::array();
  for (const auto& h : heldout) {
    const CompareStats& c = h.stats;
    j["heldout"].push_back({{"path", h.path},
                            {"docs", c.docs},
                            {"chars", c.chars},
                            {"tokens_before", c.tokens_before},
                            {"tokens_after", c.tokens_after},
                            {"tokens_per_char_before", c.per_char(c.tokens_before)},
                            {"tokens_per_char_after", c.per_char(c.tokens_after)},
                            {"token_change", c.change()},
                            {"coverage", c.coverage()},
                            {"docs_all_kept", c.docs_all_kept},
                            {"docs_all_kept_identical", c.docs_all_kept_identical},
                            {"docs_round_trip", c.docs_round_trip}});
  }
  j["notes"] = notes;
  j["files"] = nlohmann::ordered_json::array();
  for (const auto& f : files) j["files"].push_back({{"name", f.name}, {"before", f.before}, {"after", f.after}});
  return j.dump(2) + "\n";
}

}  // namespace pocket::prune
