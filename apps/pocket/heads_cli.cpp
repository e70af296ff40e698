#include "heads_cli.h"

#include <cstdlib>

#include "formats/content_hash.h"
#include "heads/head_file.h"
#include "util/thread_pool.h"

namespace pocket::cli {

void add_data_options(CLI::App& app, heads::DataOptions& d) {
  app.add_option("--format", d.format, "Data format: jsonl, csv, tsv or auto (by extension; default)")
      ->check(CLI::IsMember({"auto", "jsonl", "csv", "tsv"}));
  app.add_option("--text-col", d.text, "Text column(s): JSON key, header name or 0-based index; a,b joins several (default text)");
  app.add_option("--label-col", d.label, "Label column (default label)");
  app.add_option("--query-col", d.query, "Query column: rows are (query, candidate) pairs for a ranking head");
  app.add_flag_function("--no-header", [&d](int64_t) { d.header = false; }, "CSV/TSV without a header row (columns by index)");
}

std::string content_hash(const LoadedModel& m, int threads) {
  ThreadPool pool(threads);
  return model_content_hash(*m.file, m.tokenizer->vocab(), &pool);
}

std::string default_feature_cache() {
  if (const char* e = std::getenv("POCKET_CACHE_DIR"); e && *e) return std::string(e) + "/features";
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return std::string(e) + "/pocket/features";
  if (const char* e = std::getenv("HOME"); e && *e) return std::string(e) + "/.cache/pocket/features";
  return "";
}

heads::Head load_checked_head(const std::string& spec, const LoadedModel& m, int threads) {
  heads::Head h = heads::load_head(spec);
  heads::check_base(h, content_hash(m, threads), spec);
  return h;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

}  // namespace pocket::cli
