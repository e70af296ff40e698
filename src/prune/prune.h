// `pocket prune-vocab IN OUT`: the whole command below the CLI. Finds what
// IN is (a tokenizer.json, a folder of tokenizer files, a model), counts
// token use on the corpus, selects and applies the pruned vocabulary
// (vocab_prune.h), writes OUT and the id map (never over IN, each file
// whole or not at all) and measures the result for the report.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "prune/corpus_stats.h"

namespace pocket::prune {

struct PruneOptions {
  int64_t keep = 0;
  std::vector<std::string> corpus;       // counting corpus (one document per line)
  std::vector<std::string> heldout;      // measured for the report, not counted
  std::string keep_tokens;               // file: one token (piece or text) per line
  uint64_t min_count = 0;
  std::string map_path;                  // "" = beside OUT
  std::string report_path;               // "" = none; .json: JSON, else markdown
  int threads = 1;
  bool progress = false;                 // progress bars on stderr (when a terminal)
};

struct FileSize {
  std::string name;
  uint64_t before = 0, after = 0;
};

struct HeldoutResult {
  std::string path;
  CompareStats stats;
};

struct PruneReport {
  std::string input, output, map_path, kind;  // kind: "tokenizer.json", "tokenizer folder", ...
  int64_t vocab_before = 0, vocab_after = 0, merges_before = 0, merges_after = 0;
  int64_t mandatory = 0, from_counts = 0, keep = 0;
  std::vector<std::string> corpus;
  uint64_t corpus_docs = 0, corpus_tokens = 0, corpus_kept_tokens = 0;
  int64_t distinct_seen = 0, distinct_seen_kept = 0;
  std::vector<HeldoutResult> heldout;
  std::vector<FileSize> files;
  std::vector<std::string> notes;

  std::string markdown() const;
  std::string json() const;
};

PruneReport prune_vocab(const std::string& in, const std::string& out, const PruneOptions& opt);

// Tokens of a conversation rendered with a chat template (Jinja source;
// every role, thinking on and off). prune_vocab keeps them, so the template
// still renders and encodes the same after pruning.
std::vector<int32_t> chat_template_tokens(const Tokenizer& tok, const std::string& jinja);

}  // namespace pocket::prune
