// Shared pieces of the pruning tests: the project's train/held-out corpus
// (tools/corpus/make_corpus.py), and one real pruned Qwen3 vocabulary made
// once per test binary.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/qwen3_tokenizer.h"
#include "prune/corpus_stats.h"
#include "prune/vocab_prune.h"
#include "tokenizer/tokenizer.h"

namespace pocket::test {

// build/corpus of the checkout when make_corpus.py has written it, else a
// fresh copy made by it in a temporary folder (kept for the whole run).
std::string corpus_dir();
inline std::string corpus_file(const std::string& name) { return corpus_dir() + "/" + name + ".txt"; }

struct PrunedQwen3 {
  std::shared_ptr<const Tokenizer> before, after;
  prune::PrunedVocab pruned;
  std::vector<uint64_t> counts;
  prune::Selection selection;
  int64_t keep = 0;
};

// Qwen3 pruned to 24,000 tokens counted on train_en and 1/8 of train_zh.
const PrunedQwen3& pruned_qwen3();

// `ids` renumbered through a pruning's old-to-new table.
inline std::vector<int32_t> mapped(const std::vector<int32_t>& ids, const std::vector<int32_t>& old_to_new) {
  std::vector<int32_t> out;
  for (int32_t id : ids) out.push_back(old_to_new[static_cast<size_t>(id)]);
  return out;
}

}  // namespace pocket::test
