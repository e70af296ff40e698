// What the DFlash draft targets (fuzz_draft_vocab, fuzz_draft_file) load
// against, built once per process: the DFlash tests' tiny Qwen3 target
// (tests/speculative/dflash_fixture.h: 64 wide, 2 layers, vocabulary 300,
// f32) with a session, and a small valid draft for it (1 layer, 2/1 heads of
// 16, FFN 16, one tap after the last layer) written in z-lab's folder layout.
// Also the seed generator's source of draft folders and Pocket draft files.
//
// exercise_drafter() is what `pocket run --dflash D --draft-vocab N` does with
// a draft that opened: build the DFlashDrafter, which gathers the head rows
// of the ranking's first N tokens, and draft one block. Checked there: the drafter's columns are
// the ranking's first N tokens in order, and each gathered row is the
// target's head row byte for byte (SubsetHead).
#pragma once
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "generate/session.h"
#include "speculative/dflash.h"
#include "speculative/dflash_file.h"
#include "speculative/draft_vocab.h"
#include "speculative/dflash_fixture.h"

namespace pocket::fuzz {

// The small draft's tensors (seed 5): about 7K weights.
inline test::Draft small_dflash_draft() {
  test::Draft d;
  d.layers = 1;
  d.heads = 2;
  d.kv_heads = 1;
  d.hd = 16;
  d.ffn = 16;
  d.taps = {1};
  d.randomize(64, 5);
  return d;
}

struct DFlashSetup {
  const LoadedModel& target = test::dflash_target();
  Session session{target.model, target.tokenizer, 16, 1};
  std::string folder;  // config.json + model.safetensors of small_dflash_draft(), no ranking

  DFlashSetup() : folder(scratch_path("dflash-draft", "")) { small_dflash_draft().write(folder, target.model->config().dim); }
  const ModelConfig& config() const { return target.model->config(); }
};

inline DFlashSetup& dflash_setup() {
  static DFlashSetup s;
  return s;
}

// Builds the drafter over `draft` with draft vocabulary `n` (as --draft-vocab
// N; kDraftVocabDefault when not given); a refused size is a pocket::Error.
inline void exercise_drafter(const std::shared_ptr<const DFlashDraft>& draft, int n) {
  DFlashSetup& s = dflash_setup();
  guarded([&] {
    DFlashDrafter d(draft, s.session, n);
    const DraftVocab* r = draft->draft_vocab();
    // A block drafted after one token (no context): DFlash2's conv and
    // selector run on whatever weights the file holds.
    std::vector<int32_t> block;
    d.draft(std::vector<int32_t>{1}, 3, block);
    for (int32_t t : block)
      if (t < 0 || t >= s.config().vocab_size) finding("drafted token " + std::to_string(t) + " outside the vocabulary");
    const int width = d.logits_width();
    if (width < 1 || width > s.config().vocab_size) finding("drafter width " + std::to_string(width) + " outside the vocabulary");
    if (width == s.config().vocab_size) return;  // the whole head, no subset
    if (!r || static_cast<size_t>(width) > r->ranked.size()) finding("a subset head without a ranking that holds it");
    for (int j = 0; j < width; ++j)
      if (d.token_of(j) != r->ranked[static_cast<size_t>(j)]) finding("drafter column " + std::to_string(j) + " is not the ranking's token");
  });
  if (const DraftVocab* r = draft->draft_vocab(); r && r->vocab_size == s.config().vocab_size) {
    const TensorView& head = s.target.file->get(s.config().tied_embeddings ? "token_embd.weight" : "output.weight");
    const std::vector<int32_t> ids(r->ranked.begin(), r->ranked.begin() + std::min<size_t>(r->ranked.size(), 64));
    const SubsetHead sub(head, ids);
    const size_t row = head.nbytes / static_cast<size_t>(head.rows());
    if (sub.view().nbytes < ids.size() * row) finding("gathered head smaller than its rows");
    for (size_t j = 0; j < ids.size(); ++j)
      if (std::memcmp(static_cast<const uint8_t*>(sub.view().data) + j * row,
                      static_cast<const uint8_t*>(head.data) + static_cast<size_t>(ids[j]) * row, row) != 0)
        finding("gathered head row " + std::to_string(j) + " differs from the head's row of token " + std::to_string(ids[j]));
  }
}

}  // namespace pocket::fuzz
