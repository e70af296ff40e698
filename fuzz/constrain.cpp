// fuzz_constrain: the structured-output parsers and the matcher behind them.
// Byte 0 picks the constraint kind (JSON Schema, GBNF, regex, choices split
// at newlines, any JSON with a whitespace bound), byte 1 seeds the token
// walk; the rest is the schema/grammar/regex text. The text is compiled
// (pocket::Error, naming the problem, is the expected answer to bad input),
// then a matcher over a small vocabulary (all 256 bytes, some multi-byte
// tokens that split UTF-8 or span JSON terminals) takes up to 24 steps:
// every token its mask allows must advance, a token the mask refuses must
// not, and end-of-sequence is in the mask exactly when the bytes so far are
// a complete match. Deep nesting, huge repetition counts and enormous enums
// must stay inside libFuzzer's time and memory limits (scripts/fuzz.sh).
// Each input runs on a vocabulary of its own: the trie and the common JSON
// frames (json_frames.h) are walked once and copied, the frames and mask
// buffers an input adds are dropped with it. So a finding replays from its
// input alone, and an input frees all it allocates (libFuzzer reruns, under
// its leak checker, every input that does not).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/frame_cache.h"
#include "constrain/json_frames.h"
#include "constrain/mask_pool.h"
#include "fuzz_util.h"

namespace {

using pocket::constrain::VocabIndex;

std::shared_ptr<const VocabIndex> small_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"{\"", "\":", "\",\"", "true", "null", "},{", "[1,", "\xe4\xbd", "\xa0\"", "\xe4\xbd\xa0",
                        "abc", "12", ".5e", "\\u00", "-0", " {", "\n  ", "ab\"}", "]}"})
    bytes.emplace_back(t);
  bytes.emplace_back("");  // the end-of-sequence id (excluded from the trie)
  std::vector<uint8_t> excluded(bytes.size(), 0);
  excluded.back() = 1;
  auto v = VocabIndex::build(bytes, excluded, {static_cast<int32_t>(bytes.size() - 1)});
  pocket::constrain::warm_json_frames(v);
  return v;
}

// The warm vocabulary with a cache and a mask pool of the input's own.
std::shared_ptr<const VocabIndex> own_copy(const VocabIndex& warm) {
  auto v = std::make_shared<VocabIndex>(warm);
  v->frame_cache = warm.frame_cache->copy();
  v->mask_pool = std::make_shared<pocket::constrain::MaskPool>(warm.mask_pool->words(), 64);
  return v;
}

bool allowed(std::span<const uint64_t> mask, int32_t t) { return (mask[t / 64] >> (t % 64)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  using Kind = constrain::ConstraintSpec::Kind;
  static const std::shared_ptr<const VocabIndex> warm = small_vocab();
  const std::shared_ptr<const VocabIndex> vocab = own_copy(*warm);
  fuzz::Bytes in(data, size);
  const uint8_t kind = in.take_byte();
  uint32_t seed = in.take_byte();
  constrain::ConstraintSpec spec;
  spec.kind = std::vector<Kind>{Kind::JsonSchema, Kind::Grammar, Kind::Regex, Kind::Choice, Kind::Json}[kind % 5];
  spec.text = std::string(in.rest());
  spec.json_max_ws = (kind / 5) % 4;
  if (spec.kind == Kind::Choice) {
    size_t start = 0;
    for (size_t i = 0; i <= spec.text.size(); ++i)
      if (i == spec.text.size() || spec.text[i] == '\n') {
        spec.choices.push_back(spec.text.substr(start, i - start));
        start = i + 1;
      }
  }
  fuzz::guarded([&] {
    auto c = constrain::compile_constraint(spec, vocab);
    auto m = c->matcher();
    const int32_t eos = vocab->vocab_size - 1;
    std::vector<std::vector<uint64_t>> masks;
    std::vector<int32_t> walk;
    for (int step = 0; step < 24; ++step) {
      auto mask = m.mask();
      masks.emplace_back(mask.begin(), mask.end());
      if (allowed(mask, eos) != m.accepting()) fuzz::finding("end-of-sequence in the mask differs from accepting()");
      std::vector<int32_t> ok, refused;
      for (int32_t t = 0; t < eos; ++t) (allowed(mask, t) ? ok : refused).push_back(t);
      if (!refused.empty() && m.would_accept(refused[seed % refused.size()]))
        fuzz::finding("would_accept() takes a token the mask refuses");
      if (ok.empty()) break;
      seed = seed * 1103515245u + 12345u;
      const int32_t t = ok[(seed >> 8) % ok.size()];
      if (!m.advance(t)) fuzz::finding("advance() refuses a token the mask allows");
      walk.push_back(t);
    }
    // The same walk again with a second matcher: its frames now come from
    // the vocabulary's cache, and every mask must be the one walked cold.
    auto again = c->matcher();
    for (size_t step = 0; step < masks.size(); ++step) {
      auto mask = again.mask();
      if (!std::equal(mask.begin(), mask.end(), masks[step].begin(), masks[step].end()))
        fuzz::finding("a mask from cached frames differs from the one walked cold");
      if (step < walk.size() && !again.advance(walk[step])) fuzz::finding("the second matcher refuses the walk");
    }
  });
  return 0;
}
