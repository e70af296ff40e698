// fuzz_draft_vocab: the input is an option byte, then a draft vocabulary
// ranking file (draft_vocab.txt: "pocket-draft-vocab 1 VOCAB_SIZE" and one
// token id per line, most frequent first), put beside a small valid DFlash
// draft folder (dflash_setup.h) as `pocket draft-vocab` leaves it.
//
// Paths, as the CLI takes them:
//   `pocket run --dflash DIR --draft-vocab N`: DFlashDraft(DIR) reads the
//     ranking (read_draft_vocab), then the drafter gathers the head rows of
//     its first N ranked tokens (N from the option byte's low 3 bits: the
//     default, 0, 1, 2, the ranking's size, one more, the vocabulary, -1);
//   `pocket convert-draft DIR OUT` (option bit 7): carries the ranking into a
//     Pocket draft file, which is opened again as --dflash OUT does.
// Checked: a ranking that loads has unique ids inside its vocabulary; the
// drafter's columns are its first N ids; the converted file's ranking equals
// the folder's; the gathered head rows equal the head's (exercise_drafter).
#include <set>

#include "dflash_setup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  fuzz::DFlashSetup& s = fuzz::dflash_setup();
  fuzz::Bytes in(data, size);
  const uint8_t opt = in.take_byte();
  fuzz::write_file(s.folder + "/" + kDraftVocabFileName, in.rest());
  std::shared_ptr<const DFlashDraft> draft;
  fuzz::guarded([&] { draft = std::make_shared<const DFlashDraft>(s.folder, s.config()); });
  if (!draft) return 0;
  const DraftVocab* r = draft->draft_vocab();
  if (!r) fuzz::finding("a draft folder with a ranking file loaded without a ranking");
  if (r->vocab_size != s.config().vocab_size) fuzz::finding("a ranking for another vocabulary size was accepted");
  std::set<int32_t> seen;
  for (int32_t id : r->ranked)
    if (id < 0 || id >= r->vocab_size || !seen.insert(id).second) fuzz::finding("ranking holds a bad or repeated id");

  const int ranked = static_cast<int>(r->ranked.size());
  const int sizes[8] = {kDraftVocabDefault, 0, 1, 2, ranked, ranked + 1, s.config().vocab_size, -1};
  fuzz::exercise_drafter(draft, sizes[opt & 7]);

  if (opt & 0x80) {
    const std::string out = fuzz::scratch_path("dflash-out", "draft.pocket");
    DFlashConvertOptions co;
    co.weights = (opt & 0x40) ? DType::PQ8 : DType::F32;
    co.group = 32;
    // The folder loaded, so converting it and opening the result must work.
    try {
      const DFlashConvertReport rep = convert_dflash_draft(s.folder, out, co);
      if (rep.draft_vocab != ranked) fuzz::finding("convert-draft carried a ranking of another size");
      const DFlashDraft back(out, s.config());
      if (!back.draft_vocab() || back.draft_vocab()->ranked != r->ranked ||
          back.draft_vocab()->vocab_size != r->vocab_size)
        fuzz::finding("the converted draft file's ranking differs from the folder's");
    } catch (const Error& e) {
      fuzz::finding(std::string("a draft that loads failed convert-draft or reopening: ") + e.what());
    }
  }
  return 0;
}
