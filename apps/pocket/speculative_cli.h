// The speculative-decoding flags of `pocket run` (--draft, --dflash,
// --draft-model, --draft-max, --draft-tree, --draft-vocab, --draft-ranking, --no-adaptive) and the generate call
// they select.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "generate/session.h"
#include "speculative/drafter.h"

namespace pocket::cli {

struct SpeculativeFlags {
  std::string draft;       // "" = plain decoding; lookup | oracle | dflash
  std::string dflash;      // a DFlash/DFlash2 draft: folder, Pocket draft file or llama.cpp GGUF; implies --draft dflash
  std::string draft_model; // a smaller model with the same tokenizer; implies --draft model
  std::string ngram_cache; // an n-gram cache file (pocket ngram-build) for the lookup drafter
  int draft_max = 16;
  int draft_tree = 0;      // --draft-tree N: candidate tokens verified as a tree (0 = one chain)
  int draft_vocab = -1;    // --draft-vocab N (DFlash, draft model): -1 = the draft's default, 0 = the whole vocabulary
  std::string draft_ranking;  // --draft-ranking FILE: a draft model's token ranking (pocket draft-vocab)
  bool no_adaptive = false;
  void add_to(CLI::App& app);
  bool enabled() const {
    return !draft.empty() || !dflash.empty() || !draft_model.empty() || !ngram_cache.empty() || draft_vocab >= 0 || !draft_ranking.empty() ||
           draft_tree > 0;
  }
  // The chosen drafter, made before any output so that a bad flag or draft
  // file is the only thing printed (the oracle runs the generation once).
  std::unique_ptr<Drafter> make_drafter(Session& session, std::span<const int32_t> input,
                                        const GenerateOptions& opt) const;
  // Generates with `drafter` and prints its statistics line to stderr
  // unless `quiet`.
  GenerateResult generate(Session& session, Drafter& drafter, std::span<const int32_t> input,
                          const GenerateOptions& opt, const std::function<bool(std::string_view)>& on_text,
                          bool quiet) const;
};

}  // namespace pocket::cli
