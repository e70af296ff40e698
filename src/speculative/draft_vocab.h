// Reduced draft vocabularies (the FR-Spec idea): a drafter scores only the
// N most frequent tokens of the target's vocabulary, so its output head
// costs N/V of the full one; the target still verifies over the whole
// vocabulary, so the output stays exactly that of plain decoding.
//
// This header owns the frequency ranking (counted on a corpus with the
// model's tokenizer, stored as a small text file beside a z-lab draft folder
// or inside a Pocket draft file) and the compact head gathered from the
// target's output matrix for the first N ranked tokens.
//
// The ranking file (draft_vocab.txt):
//   pocket-draft-vocab 1 VOCAB_SIZE
//   id            <- most frequent first, one decimal id per line
//   ...
// Every id must be inside [0, VOCAB_SIZE) and appear once.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace pocket {

class Tokenizer;

// The file name a z-lab draft folder keeps its ranking under.
inline constexpr const char* kDraftVocabFileName = "draft_vocab.txt";
// The Pocket draft file's keys: the ranked ids (i32 array) and the vocabulary size they index.
inline constexpr const char* kDraftVocabKey = "pocket.dflash.draft_vocab";
inline constexpr const char* kDraftVocabSizeKey = "pocket.dflash.draft_vocab_size";

// The draft vocabulary a drafter uses when the draft has a ranking and the
// user chose none (pocket-mini's measurement: docs/benchmarks.md).
inline constexpr int kDefaultDraftVocab = 8192;

struct DraftVocab {
  int32_t vocab_size = 0;        // the vocabulary the ids index
  std::vector<int32_t> ranked;   // most frequent first, no duplicates
};

// Throws pocket::Error naming `where` unless every id is in [0, vocab_size)
// and unique, and vocab_size > 0.
void check_draft_vocab(const DraftVocab& v, const std::string& where);

// Parses / reads / writes (via a temporary name) the text form above.
DraftVocab parse_draft_vocab(const std::string& text, const std::string& where);
DraftVocab read_draft_vocab(const std::string& path);
void write_draft_vocab(const std::string& path, const DraftVocab& v);

// Ranks token ids by count (highest first, ties by id), keeping ids with a
// nonzero count; `first` (e.g. the end-of-sequence tokens, which a corpus
// of one document per line never contains) go ahead of all, in order.
// At most `top` ids when top > 0.
DraftVocab rank_tokens(std::span<const uint64_t> counts, std::span<const int32_t> first, int top = 0);

// The tokenizer's end-of-sequence ids (the ones a ranking puts first).
std::vector<int32_t> eos_ids(const Tokenizer& tok);

// `pocket draft-vocab`: counts token use over UTF-8 corpus files (one
// document per line, plain encodings) on `threads` threads and ranks the
// ids as rank_tokens does, the end-of-sequence tokens first.
DraftVocab build_draft_vocab(const Tokenizer& tok, const std::vector<std::string>& corpus_files, int threads, int top = 0);

// The rows of an output head (vocab x hidden, any weight type) for a subset
// of token ids, gathered once with their bytes unchanged, so each subset
// logit is computed from exactly the weights of the full head's row.
class SubsetHead {
 public:
  SubsetHead(const TensorView& head, std::vector<int32_t> ids);
  SubsetHead(const SubsetHead&) = delete;
  SubsetHead& operator=(const SubsetHead&) = delete;
  const TensorView& view() const { return view_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  int size() const { return static_cast<int>(ids_.size()); }

 private:
  std::vector<int32_t> ids_;
  std::vector<uint8_t> bytes_;
  TensorView view_;
};

}  // namespace pocket
