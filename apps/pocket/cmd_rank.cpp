// pocket rank: orders candidates for a query, by a trained pointwise head or
// zero-shot by length-normalised log-likelihood; the query's KV cache is
// computed once and shared by every candidate.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "heads/scorer.h"
#include "heads_cli.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::cli {

namespace {

struct RankArgs {
  ModelOptions model;
  heads::DataOptions data;
  std::string query, candidates, head, tmpl, positive;
  int top = 0, max_tokens = 1024;
  bool json = false;
};

int run_rank(RankArgs& a) {
  heads::DataOptions d = a.data;
  d.require_label = false;
  d.label.clear();
  std::vector<std::string> cands;
  const bool plain = a.candidates.size() < 6 || a.candidates.compare(a.candidates.size() - 6, 6, ".jsonl") != 0;
  if (plain && d.format == "auto") {  // one candidate per line
    const std::string text = read_text_file(a.candidates);
    size_t b = 0;
    while (b < text.size()) {
      size_t e = text.find('\n', b);
      if (e == std::string::npos) e = text.size();
      std::string line = text.substr(b, e - b);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) {
        if (!heads::valid_utf8(line)) fail(a.candidates, ": line ", cands.size() + 1, " is not valid UTF-8");
        cands.push_back(line);
      }
      b = e + 1;
    }
  } else {
    for (const heads::Example& e : heads::load_examples(a.candidates, d)) cands.push_back(e.text);
  }
  if (cands.empty()) fail(a.candidates, ": no candidates");
  LoadedModel m = a.model.load();
  const int threads = a.model.resolve_threads();
  heads::Scorer scorer(m.model, m.tokenizer, threads, a.max_tokens);
  std::vector<heads::Ranked> ranked;
  if (!a.head.empty()) {
    heads::Head h = load_checked_head(a.head, m, threads);
    ranked = scorer.rank_head(h, a.query, cands, a.positive);
  } else {
    ranked = scorer.rank_loglik(a.query, cands, a.tmpl);
  }
  const size_t n = a.top > 0 ? std::min<size_t>(static_cast<size_t>(a.top), ranked.size()) : ranked.size();
  if (a.json) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i)
      j.push_back({{"rank", i + 1}, {"index", ranked[i].index}, {"score", ranked[i].score}, {"text", cands[static_cast<size_t>(ranked[i].index)]}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  for (size_t i = 0; i < n; ++i)
    std::printf("%zu\t%.5f\t%s\n", i + 1, ranked[i].score, cands[static_cast<size_t>(ranked[i].index)].c_str());
  return 0;
}

}  // namespace

void add_rank(CLI::App& app, int& rc) {
  auto a = std::make_shared<RankArgs>();
  CLI::App* sub = app.add_subcommand("rank", "Rank candidates for a query (trained head, or zero-shot log-likelihood)");
  a->model.add_to(*sub);
  sub->add_option("--query", a->query, "The query")->required();
  sub->add_option("--candidates", a->candidates, "Candidates: one per line, or a .jsonl/.csv/.tsv file (--text-col)")->required();
  sub->add_option("--format", a->data.format, "Candidates file format: jsonl, csv, tsv (default: lines, or by extension)")
      ->check(CLI::IsMember({"auto", "jsonl", "csv", "tsv"}));
  sub->add_option("--text-col", a->data.text, "Candidate text column (default text)");
  sub->add_option("--head", a->head, "Pointwise ranking head (trained with --query-col); default: zero-shot log-likelihood");
  sub->add_option("--positive", a->positive, "The head's label that means relevant (default: its last label)");
  sub->add_option("--template", a->tmpl, "Prompt template with {text} applied to the query (zero-shot)");
  sub->add_option("--top", a->top, "Print only the best N")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-tokens", a->max_tokens, "Context for the query plus one candidate (default 1024)")->check(CLI::Range(2, 1 << 20));
  sub->add_flag("--json", a->json, "Print JSON");
  sub->footer("Scores: with --head, the head's probability of the positive label from the candidate's pooled states\n"
              "after the query; without, the mean log-probability of the candidate's tokens after the query.");
  sub->callback([a, &rc] { rc = run_rank(*a); });
}

}  // namespace pocket::cli
