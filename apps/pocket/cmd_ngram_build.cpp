// pocket ngram-build: an n-gram cache file for `pocket run --draft lookup
// --ngram-cache FILE`, counted on a corpus with a model's tokenizer
// (src/speculative/ngram_cache.h).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "speculative/ngram_cache.h"
#include "util/error.h"

namespace pocket::cli {

namespace {

struct NgramBuildArgs {
  ModelOptions model;
  std::vector<std::string> corpus;
  std::string out;
  int n = 3, cont = 8;
  size_t max_entries = 1'000'000;
};

int ngram_build(const NgramBuildArgs& a) {
  const LoadedModel m = a.model.load();
  NgramCache cache(m.model->config().vocab_size, a.n, a.cont);
  size_t docs = 0, tokens = 0;
  for (const std::string& path : a.corpus) {
    std::ifstream f(path);
    if (!f) fail(path, ": cannot open the corpus file");
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      const auto ids = m.tokenizer->encode(line);
      cache.add(ids);
      ++docs;
      tokens += ids.size();
    }
  }
  cache.prune(a.max_entries);
  cache.save(a.out);
  std::printf("%s: %zu contexts of %d tokens (at most %zu) from %zu documents, %zu tokens\n", a.out.c_str(),
              cache.size(), a.n, a.max_entries, docs, tokens);
  return 0;
}

}  // namespace

void add_ngram_build(CLI::App& app, int& rc) {
  auto a = std::make_shared<NgramBuildArgs>();
  CLI::App* sub = app.add_subcommand(
      "ngram-build", "Build an n-gram cache file from a corpus for pocket run --draft lookup --ngram-cache FILE");
  a->model.add_to(*sub);
  sub->add_option("--corpus", a->corpus, "UTF-8 text files, one document per line")->required()->expected(1, -1);
  sub->add_option("-o,--output", a->out, "The cache file to write")->required();
  sub->add_option("--n", a->n, "Context length in tokens (1..8, default 3)")->check(CLI::Range(1, NgramCache::kMaxN));
  sub->add_option("--cont", a->cont, "Longest continuation stored per context (1..32, default 8)")
      ->check(CLI::Range(1, NgramCache::kMaxCont));
  sub->add_option("--max-entries", a->max_entries, "Keep this many most frequent contexts (default 1000000)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 28));
  sub->callback([a, &rc] { rc = ngram_build(*a); });
}

}  // namespace pocket::cli
