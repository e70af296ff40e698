#include "speculative_cli.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "speculative/dflash.h"
#include "runtime/loader.h"
#include "speculative/drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_cache.h"
#include "speculative/speculative.h"
#include "util/error.h"

namespace pocket::cli {

void SpeculativeFlags::add_to(CLI::App& app) {
  app.add_option("--draft", draft,
                 "Speculative decoding drafter: lookup (prompt/history n-grams) or oracle (replays the model's own "
                 "greedy output: the ceiling; runs the generation twice), dflash (a block draft from --dflash) or model "
                 "(--draft-model)")
      ->check(CLI::IsMember({"lookup", "oracle", "dflash", "model"}));
  app.add_option("--draft-model", draft_model,
                 "Draft model: a smaller model with the same tokenizer, drafting greedily with its own KV cache; "
                 "implies --draft model");
  app.add_option("--dflash", dflash,
                 "DFlash or DFlash2 draft conditioned on this model's hidden states: a z-lab folder (config.json + "
                 "model.safetensors), a Pocket draft file (pocket convert-draft) or a llama.cpp GGUF (dflash.* keys); "
                 "implies --draft dflash");
  app.add_option("--ngram-cache", ngram_cache,
                 "With --draft lookup: an n-gram cache file (pocket ngram-build) drafting when the text so far has no "
                 "match; implies --draft lookup");
  app.add_option("--draft-max", draft_max, "Largest drafted block verified at once (1..32)")
      ->check(CLI::Range(1, 32));
  app.add_option("--draft-tree", draft_tree,
                 "Tree verification: the drafter proposes up to N candidate tokens as a tree (lookup: every earlier "
                 "occurrence's continuation; model: its top candidates at the first positions; DFlash: the block's "
                 "second choice at its first positions, each followed by the block's later guesses), all verified in "
                 "one pass, the longest path the model agrees with kept (0 = one chain; 2..63)")
      ->check(CLI::Range(0, 63));
  app.add_option("--draft-vocab", draft_vocab,
                 "With --dflash or --draft-model: the draft scores only the N most frequent tokens of its ranking "
                 "(pocket draft-vocab; stored with a DFlash draft, --draft-ranking or draft_vocab.txt in a draft "
                 "model's folder), the target still verifies the whole vocabulary; 0 = the whole vocabulary "
                 "(default: " + std::to_string(kDefaultDraftVocab) + " when the draft has a ranking)")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--draft-ranking", draft_ranking,
                 "With --draft-model: the token ranking (pocket draft-vocab) for --draft-vocab (default: "
                 "draft_vocab.txt in the draft model's folder, when there is one)");
  app.add_flag("--no-adaptive", no_adaptive,
               "Always verify --draft-max drafted tokens (default: choose the block from measured cost and acceptance, "
               "plain decoding when speculation would lose)");
}

std::unique_ptr<Drafter> SpeculativeFlags::make_drafter(Session& session, std::span<const int32_t> input,
                                                        const GenerateOptions& opt) const {
  std::unique_ptr<Drafter> drafter;
  if (!dflash.empty() && !draft_model.empty())
    fail_as(ErrorCode::InvalidArgument, "--dflash and --draft-model are two drafters: give one");
  const std::string kind = !draft.empty()         ? draft
                           : !draft_model.empty() ? "model"
                           : !dflash.empty()      ? "dflash"
                           : !ngram_cache.empty() ? "lookup"
                                                  : "dflash";
  if (!dflash.empty() && kind != "dflash")
    fail_as(ErrorCode::InvalidArgument, "--dflash gives a DFlash draft: use it without --draft or with --draft dflash");
  if (!draft_model.empty() && kind != "model")
    fail_as(ErrorCode::InvalidArgument, "--draft-model gives a draft model: use it without --draft or with --draft model");
  if (!ngram_cache.empty() && kind != "lookup")
    fail_as(ErrorCode::InvalidArgument, "--ngram-cache is for the lookup drafter: use it with --draft lookup");
  if (draft_vocab >= 0 && kind != "dflash" && kind != "model")
    fail_as(ErrorCode::InvalidArgument, "--draft-vocab is for DFlash drafts (--dflash) and draft models (--draft-model)");
  if (!draft_ranking.empty() && kind != "model")
    fail_as(ErrorCode::InvalidArgument, "--draft-ranking is for draft models (--draft-model); a DFlash draft carries "
                                        "its ranking (", kDraftVocabFileName, " in its folder, or inside its Pocket file)");
  if (draft_tree != 0) {
    check_speculative_options({draft_max, !no_adaptive, draft_tree});
    if (!session.tree_verifiable())
      fail_as(ErrorCode::InvalidArgument, "--draft-tree: this model has sliding-window layers (tree verification needs "
                                          "every layer to see the whole context)");
  }
  if (kind == "model") {
    if (draft_model.empty()) fail_as(ErrorCode::InvalidArgument, "--draft model needs --draft-model FILE");
    LoadedModel d = load_model(draft_model);
    auto m = std::make_unique<ModelDrafter>(d.model, d.tokenizer, session.tokenizer(), session.context_size(),
                                            session.shared_pool());
    std::string ranking = draft_ranking;
    if (ranking.empty() && std::filesystem::is_directory(draft_model) &&
        std::filesystem::exists(draft_model + "/" + kDraftVocabFileName))
      ranking = draft_model + "/" + kDraftVocabFileName;
    if (!ranking.empty()) {
      const DraftVocab v = read_draft_vocab(ranking);
      m->use_draft_vocab(v, draft_vocab < 0 ? std::min<int>(kDefaultDraftVocab, static_cast<int>(v.ranked.size())) : draft_vocab);
    } else if (draft_vocab > 0) {
      fail_as(ErrorCode::InvalidArgument, "--draft-vocab ", draft_vocab, " needs a token ranking for the draft model: "
              "--draft-ranking FILE (pocket draft-vocab), or ", kDraftVocabFileName, " in its folder");
    }
    drafter = std::move(m);
  } else if (kind == "dflash") {
    if (dflash.empty()) fail_as(ErrorCode::InvalidArgument, "--draft dflash needs --dflash DIR (the draft's folder, or a draft file)");
    auto d = std::make_shared<const DFlashDraft>(dflash, session.model().config());
    drafter = std::make_unique<DFlashDrafter>(std::move(d), session, draft_vocab < 0 ? kDraftVocabDefault : draft_vocab);
  } else if (kind == "lookup") {
    std::shared_ptr<const NgramCache> cache;
    if (!ngram_cache.empty())
      cache = std::make_shared<const NgramCache>(NgramCache::load(ngram_cache, session.model().config().vocab_size));
    drafter = std::make_unique<LookupDrafter>(2, 4, std::move(cache));
  } else if (kind == "oracle") {
    if (opt.sampling.temperature != 0.0f)
      fail_as(ErrorCode::InvalidArgument, "--draft oracle replays the greedy output: use it with --temp 0");
    GenerateResult first = session.generate(input, opt);
    std::vector<int32_t> seq(input.begin(), input.end());
    seq.insert(seq.end(), first.tokens.begin(), first.tokens.end());
    drafter = std::make_unique<ReplayDrafter>(std::move(seq));
    session.reset();
  } else {
    fail_as(ErrorCode::InvalidArgument, "unknown drafter '", draft, "' (lookup, oracle, dflash, model)");
  }
  return drafter;
}

GenerateResult SpeculativeFlags::generate(Session& session, Drafter& drafter, std::span<const int32_t> input,
                                          const GenerateOptions& opt,
                                          const std::function<bool(std::string_view)>& on_text, bool quiet) const {
  SpeculativeStats st;
  GenerateResult r = generate_speculative(session, drafter, input, opt, {draft_max, !no_adaptive, draft_tree}, on_text, &st);
  if (!quiet)
    std::fprintf(stderr,
                 "\n[speculative %s: %d steps, %d verified a draft | drafted %d, accepted %d (%.0f%%), %.2f per verify | "
                 "draft %.3f s (+%.3f s catching up, %.3f s of it on the prompt), verify %.3f s%s]",
                 drafter.name(), st.steps, st.verify_steps, st.drafted, st.accepted,
                 st.drafted ? 100.0 * st.accepted / st.drafted : 0.0, st.mean_accepted(), st.draft_seconds,
                 st.catch_up_seconds + st.prompt_draft_seconds, st.prompt_draft_seconds, st.verify_seconds, draft_tree > 0 ? (" | " + std::to_string(st.tree_steps) + " trees").c_str() : "");
  return r;
}

}  // namespace pocket::cli
