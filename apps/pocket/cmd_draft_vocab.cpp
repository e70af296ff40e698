// pocket draft-vocab: the frequency ranking of a model's tokens over a
// corpus, which a DFlash draft keeps beside its config.json to draft over a
// reduced vocabulary (`pocket run --dflash DIR --draft-vocab N`;
// src/speculative/draft_vocab.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "speculative/draft_vocab.h"

namespace pocket::cli {

namespace {

struct DraftVocabArgs {
  ModelOptions model;
  std::vector<std::string> corpus;
  std::string out;
  int top = 0;
};

int draft_vocab(const DraftVocabArgs& a) {
  const LoadedModel m = a.model.load();
  DraftVocab v = build_draft_vocab(*m.tokenizer, a.corpus, a.model.resolve_threads(), a.top);
  if (v.vocab_size != m.model->config().vocab_size) {  // a head padded past the tokenizer
    v.vocab_size = m.model->config().vocab_size;
    check_draft_vocab(v, a.out);
  }
  write_draft_vocab(a.out, v);
  std::printf("%s: %zu of %d token ids ranked by use\n", a.out.c_str(), v.ranked.size(), v.vocab_size);
  return 0;
}

}  // namespace

void add_draft_vocab(CLI::App& app, int& rc) {
  auto a = std::make_shared<DraftVocabArgs>();
  CLI::App* sub = app.add_subcommand(
      "draft-vocab",
      "Rank a model's tokens by use on a corpus (its training text) for a DFlash draft's reduced vocabulary: write it "
      "as DRAFT_DIR/draft_vocab.txt, then pocket run --dflash DRAFT_DIR --draft-vocab N");
  a->model.add_to(*sub);
  sub->add_option("--corpus", a->corpus, "UTF-8 text files, one document per line")->required()->expected(1, -1);
  sub->add_option("-o,--output", a->out, "The ranking file to write (e.g. DRAFT_DIR/draft_vocab.txt)")->required();
  sub->add_option("--top", a->top, "Keep only the N most used tokens (default: every token the corpus uses)")
      ->check(CLI::Range(0, 1 << 24));
  sub->callback([a, &rc] { rc = draft_vocab(*a); });
}

}  // namespace pocket::cli
