// Corpus statistics for vocabulary pruning: token use counted by encoding a
// corpus (one document per line) on all threads, and tokens per character
// of held-out text. Corpus files must be UTF-8.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pocket::prune {

// A corpus file, memory-resident, split into documents (lines without the
// line break; empty lines are skipped). Throws pocket::Error naming the file,
// line and byte if it is not valid UTF-8.
class Corpus {
 public:
  static Corpus read(const std::string& path);
  // The same from text in memory; `name` stands for the path in errors.
  static Corpus from_text(std::string text, const std::string& name);
  const std::string& path() const { return path_; }
  const std::vector<std::string_view>& docs() const { return docs_; }
  uint64_t bytes() const { return text_->size(); }

 private:
  std::string path_;
  std::shared_ptr<const std::string> text_;  // shared, so copies keep docs_ valid
  std::vector<std::string_view> docs_;
};

// Called now and then with (bytes done, bytes in all).
using CountProgress = std::function<void(uint64_t done, uint64_t total)>;
// A progress bar on stderr when it is a terminal; empty otherwise.
CountProgress terminal_count_progress(const std::string& label);

// How often each token id appears in the plain (no special-token matching)
// encodings of every document of every corpus.
std::vector<uint64_t> count_tokens(const Tokenizer& tok, const std::vector<Corpus>& corpora, int threads,
                                   const CountProgress& progress = {});

// One corpus encoded by an original and a pruned tokenizer.
struct CompareStats {
  uint64_t docs = 0, chars = 0;         // Unicode characters of the documents
  uint64_t tokens_before = 0, tokens_after = 0;
  uint64_t kept_before = 0;             // original tokens that the pruned vocabulary keeps
  uint64_t docs_all_kept = 0;           // documents whose original tokens are all kept...
  uint64_t docs_all_kept_identical = 0; // ...and of those, the ones encoded identically (mapped)
  uint64_t docs_round_trip = 0;         // documents the pruned tokenizer decodes back exactly
  double per_char(uint64_t tokens) const { return chars ? static_cast<double>(tokens) / static_cast<double>(chars) : 0; }
  double change() const {  // relative change of the token count
    return tokens_before ? static_cast<double>(tokens_after) / static_cast<double>(tokens_before) - 1 : 0;
  }
  double coverage() const { return tokens_before ? static_cast<double>(kept_before) / static_cast<double>(tokens_before) : 0; }
};

// Plain encodings of every document with both tokenizers; old_to_new maps
// the original ids to the pruned ones (-1 where dropped).
CompareStats compare_tokenizers(const Tokenizer& before, const Tokenizer& after, const std::vector<int32_t>& old_to_new,
                                const Corpus& corpus, int threads);

}  // namespace pocket::prune
