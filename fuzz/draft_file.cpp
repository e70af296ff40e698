// fuzz_draft_file: the input is a Pocket DFlash draft file (a GGUF written by
// `pocket convert-draft`: the draft's config.json under pocket.dflash.config,
// its tensors, and optionally the draft vocabulary ranking as the i32 array
// pocket.dflash.draft_vocab with pocket.dflash.draft_vocab_size) or a
// llama.cpp DFlash/DFlash2 GGUF (general.architecture dflash), opened as
// `pocket run --dflash FILE` does: DFlashDraft (open_dflash_draft_file, then
// the config and every tensor's shape against the tiny target of
// dflash_setup.h), then the drafter with the default draft vocabulary and
// with one token (exercise_drafter's checks).
#include "dflash_setup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  fuzz::DFlashSetup& s = fuzz::dflash_setup();
  const std::string path = fuzz::scratch_path("dflash-file", "input.pocket");
  fuzz::write_file(path, data, size);
  std::shared_ptr<const DFlashDraft> draft;
  fuzz::guarded([&] { draft = std::make_shared<const DFlashDraft>(path, s.config()); });
  if (!draft) return 0;
  if (const DraftVocab* r = draft->draft_vocab(); r && r->vocab_size != s.config().vocab_size)
    fuzz::finding("a ranking for another vocabulary size was accepted");
  fuzz::exercise_drafter(draft, kDraftVocabDefault);
  fuzz::exercise_drafter(draft, 1);
  return 0;
}
