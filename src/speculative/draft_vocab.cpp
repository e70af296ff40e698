#include "speculative/draft_vocab.h"

#include <algorithm>
#include <charconv>
#include <ostream>

#include "prune/corpus_stats.h"
#include "prune/prune_model.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {

constexpr std::string_view kMagic = "pocket-draft-vocab";

// The next line of `text` from `pos` (without its line break).
std::string_view next_line(std::string_view text, size_t& pos) {
  const size_t end = std::min(text.find('\n', pos), text.size());
  std::string_view line = text.substr(pos, end - pos);
  pos = end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// A whole-line non-negative decimal integer, or -1.
int64_t parse_id(std::string_view s) {
  int64_t v = -1;
  if (s.empty() || s.size() > 10) return -1;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && v >= 0 ? v : -1;
}

}  // namespace

void check_draft_vocab(const DraftVocab& v, const std::string& where) {
  if (v.vocab_size <= 0) fail(where, ": draft vocabulary for a vocabulary of ", v.vocab_size, " tokens");
  if (v.ranked.empty()) fail(where, ": the draft vocabulary ranks no token");
  std::vector<bool> seen(static_cast<size_t>(v.vocab_size), false);
  for (size_t i = 0; i < v.ranked.size(); ++i) {
    const int32_t id = v.ranked[i];
    if (id < 0 || id >= v.vocab_size)
      fail(where, ": draft vocabulary entry ", i + 1, " is token ", id, ", outside the vocabulary of ", v.vocab_size,
           " tokens");
    if (seen[static_cast<size_t>(id)]) fail(where, ": draft vocabulary lists token ", id, " twice");
    seen[static_cast<size_t>(id)] = true;
  }
}

DraftVocab parse_draft_vocab(const std::string& text, const std::string& where) {
  size_t pos = 0;
  const std::string_view all = text;
  const std::string_view head = next_line(all, pos);
  // "pocket-draft-vocab 1 VOCAB_SIZE"
  if (head.substr(0, kMagic.size()) != kMagic)
    fail(where, ": not a draft vocabulary file (the first line must be \"", kMagic, " 1 VOCAB_SIZE\")");
  std::string_view rest = head.substr(kMagic.size());
  if (rest.substr(0, 3) != " 1 ")
    fail(where, ": unsupported draft vocabulary version (the first line must be \"", kMagic, " 1 VOCAB_SIZE\")");
  const int64_t vocab = parse_id(rest.substr(3));
  if (vocab <= 0 || vocab > (int64_t{1} << 24)) fail(where, ": bad vocabulary size '", rest.substr(3), "' in the first line");
  DraftVocab v;
  v.vocab_size = static_cast<int32_t>(vocab);
  for (int line = 2; pos < all.size(); ++line) {
    const std::string_view s = next_line(all, pos);
    if (s.empty() && pos >= all.size()) break;  // the final line break
    const int64_t id = parse_id(s);
    if (id < 0) fail(where, ": line ", line, " is not a token id: '", s.substr(0, 32), "'");
    if (id >= vocab)
      fail(where, ": line ", line, " is token ", id, ", outside the vocabulary of ", vocab, " tokens");
    if (v.ranked.size() >= static_cast<size_t>(vocab)) fail(where, ": more ids than the vocabulary has tokens");
    v.ranked.push_back(static_cast<int32_t>(id));
  }
  check_draft_vocab(v, where);
  return v;
}

DraftVocab read_draft_vocab(const std::string& path) { return parse_draft_vocab(read_text_file(path), path); }

void write_draft_vocab(const std::string& path, const DraftVocab& v) {
  check_draft_vocab(v, path);
  write_file_atomically(path, [&](std::ostream& out) {
    out << kMagic << " 1 " << v.vocab_size << '\n';
    for (int32_t id : v.ranked) out << id << '\n';
  });
}

DraftVocab rank_tokens(std::span<const uint64_t> counts, std::span<const int32_t> first, int top) {
  DraftVocab v;
  v.vocab_size = static_cast<int32_t>(counts.size());
  std::vector<bool> taken(counts.size(), false);
  for (int32_t id : first)
    if (id >= 0 && static_cast<size_t>(id) < counts.size() && !taken[static_cast<size_t>(id)]) {
      v.ranked.push_back(id);
      taken[static_cast<size_t>(id)] = true;
    }
  std::vector<int32_t> rest;
  for (size_t id = 0; id < counts.size(); ++id)
    if (!taken[id] && counts[id] > 0) rest.push_back(static_cast<int32_t>(id));
  std::stable_sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
    return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)];
  });
  v.ranked.insert(v.ranked.end(), rest.begin(), rest.end());
  if (top > 0 && v.ranked.size() > static_cast<size_t>(top)) v.ranked.resize(static_cast<size_t>(top));
  return v;
}

std::vector<int32_t> eos_ids(const Tokenizer& tok) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.is_eos(id)) out.push_back(id);
  return out;
}

DraftVocab build_draft_vocab(const Tokenizer& tok, const std::vector<std::string>& corpus_files, int threads, int top) {
  if (corpus_files.empty()) fail_as(ErrorCode::InvalidArgument, "draft vocabulary: no corpus file given");
  std::vector<prune::Corpus> corpora;
  for (const auto& path : corpus_files) corpora.push_back(prune::Corpus::read(path));
  const std::vector<uint64_t> counts =
      prune::count_tokens(tok, corpora, threads, prune::terminal_count_progress("counting"));
  DraftVocab v = rank_tokens(counts, eos_ids(tok), top);
  if (v.ranked.empty()) fail("draft vocabulary: the corpus has no tokens");
  return v;
}

SubsetHead::SubsetHead(const TensorView& head, std::vector<int32_t> ids) : ids_(std::move(ids)) {
  if (ids_.empty()) fail("draft vocabulary: no tokens to keep");
  // The pruning code's row gather: bytes copied unchanged, PQ tiles regathered.
  bytes_ = prune::select_rows(head, ids_, "draft vocabulary head (" + head.name + ")");
  view_ = head;
  view_.name = head.name + " (draft vocabulary)";
  view_.shape = {static_cast<int64_t>(ids_.size()), head.cols()};
  view_.data = bytes_.data();
  view_.nbytes = bytes_.size();
}

}  // namespace pocket
