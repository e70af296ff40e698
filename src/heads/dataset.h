// Labelled examples from JSONL, CSV or TSV files (heads training and
// evaluation): which columns hold the text (several are joined), the label
// and, for ranking pairs, the query; an optional row filter (a split column).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pocket::heads {

struct Example {
  std::string text;
  std::string label;  // empty when the file has no label column
  std::string query;  // ranking pairs: the query the text is a candidate for
};

struct DataOptions {
  std::string format = "auto";  // jsonl | csv | tsv | auto (by extension: .jsonl/.json, .csv, .tsv/.txt)
  // Columns: JSON keys, CSV/TSV header names, or 0-based indices ("2").
  // `text` may list several, comma-separated ("title,description"); they are joined by ". ".
  std::string text = "text", label = "label", query;
  bool header = true;         // CSV/TSV: the first row names the columns
  std::string where;          // "COL=VALUE": keep only those rows (e.g. split=train)
  bool require_label = true;
};

// Reads every example; one pocket::Error naming the file and line for a
// malformed row, a missing column or invalid UTF-8.
std::vector<Example> load_examples(const std::string& path, const DataOptions& opt);

// A deterministic sample of at most n examples (all of them when n <= 0 or
// n >= size), chosen by `seed`, in a seed-shuffled order.
std::vector<Example> subsample(std::vector<Example> all, int64_t n, uint64_t seed);

// Splits one CSV/TSV record starting at `pos` (quotes "..." with "" escapes,
// fields may span lines); advances pos past the record. Exposed for tests.
std::vector<std::string> split_record(const std::string& s, size_t& pos, char sep, bool& ok);

bool valid_utf8(const std::string& s);

}  // namespace pocket::heads
