// pocket prune-vocab: a smaller BPE vocabulary (byte-level, or SentencePiece
// with byte fallback) chosen by token use on a corpus, for a tokenizer or a
// whole model (src/prune/).
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "prune/prune.h"
#include "util/error.h"

namespace pocket::cli {

namespace {

struct PruneArgs {
  std::string in, out, report, map;
  prune::PruneOptions opt;
  int threads = 0;
};

int prune_vocab(PruneArgs& a) {
  a.opt.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  a.opt.map_path = a.map;
  a.opt.progress = true;
  a.opt.report_path = a.report;
  const std::string md = prune::prune_vocab(a.in, a.out, a.opt).markdown();
  std::fwrite(md.data(), 1, md.size(), stdout);
  return 0;
}

}  // namespace

void add_prune_vocab(CLI::App& app, int& rc) {
  auto a = std::make_shared<PruneArgs>();
  CLI::App* sub = app.add_subcommand(
      "prune-vocab",
      "Prune a byte-level BPE vocabulary (of a tokenizer or a model), or a SentencePiece BPE one with byte fallback (of a "
      "GGUF or Pocket model), to the tokens a corpus uses most");
  sub->add_option("input", a->in,
                  "tokenizer.json, a folder of tokenizer files, a Hugging Face model folder, a GGUF or a Pocket file")
      ->required();
  sub->add_option("output", a->out, "What to write, of the same kind as the input; never the input")->required();
  sub->add_option("--keep", a->opt.keep, "Tokens to keep, all kinds together (e.g. 64000)")->required();
  sub->add_option("--corpus", a->opt.corpus, "UTF-8 text files, one document per line, to count token use on")
      ->required()
      ->expected(1, -1);
  sub->add_option("--keep-tokens", a->opt.keep_tokens,
                  "File: one token per line (as spelled in the vocabulary, or text whose tokens are all kept)");
  sub->add_option("--min-count", a->opt.min_count,
                  "Tokens seen fewer times are not chosen by count (default 0: unseen tokens fill the rest in id order)");
  sub->add_option("--heldout", a->opt.heldout, "UTF-8 text files (not counted) to measure tokens/char on")
      ->expected(1, -1);
  sub->add_option("--report", a->report, "Also write the report here (.json: JSON, else markdown)");
  sub->add_option("--map", a->map, "Where to write the old->new id map (default: beside OUT)");
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)");
  sub->callback([a, &rc] { rc = prune_vocab(*a); });
}

}  // namespace pocket::cli
