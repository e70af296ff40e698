// fuzz_tokenize_diff: differential fuzzing of the byte-level BPE encoder on
// the real Qwen3 tokenizer (loaded once per process). The input is text
// (arbitrary bytes, first 2048 used). Compared, any disagreement a crash:
//  1. Tokenizer::encode (the optimized path: special-token scan, fast NFC,
//     pre-tokenizer, the word cache for texts of more than 64 pieces, the
//     linear-scan merge loop with the dense byte-pair table for words of up
//     to 64 bytes, the heap loop for longer ones) against a plain reference
//     written from the definition: nfc_full(), pretokenize(), then for each
//     piece repeatedly merge the adjacent pair of lowest merge rank
//     (leftmost first) on the vocab's piece strings, as
//     tests/tokenizer/bpe_paths_test.cpp does; user-defined (non-special)
//     added tokens such as Qwen3's <think> are split out of the raw text
//     first, leftmost occurrence and the longest at one position, as the
//     Hugging Face library does, and each becomes its own id;
//  2. for every piece of 2..64 bytes, the linear-scan loop against the heap
//     loop directly (Tokenizer::Impl, built from the same vocab);
//  3. unicode::nfc (normalizes only the chunks that can change) against
//     unicode::nfc_full (the whole text by the full algorithm).
#include <unordered_map>

#include "fuzz_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace {

using namespace pocket;

struct Reference {
  const Tokenizer& tok;
  std::unordered_map<std::string, int> ranks;  // "left\xffright" -> rank (first wins); \xff never occurs in UTF-8
  Tokenizer::Impl impl;                        // a second build, to call the merge loops directly
  std::vector<std::pair<std::string, int32_t>> user_defined;  // added tokens plain text matches

  // The next user-defined token at or after `from`: its position and index
  // into user_defined, or npos when none occurs.
  std::pair<size_t, size_t> next_user_defined(std::string_view text, size_t from) const {
    size_t best_pos = std::string_view::npos, best = 0;
    for (size_t i = 0; i < user_defined.size(); ++i) {
      const size_t pos = text.find(user_defined[i].first, from);
      if (pos == std::string_view::npos) continue;
      if (pos < best_pos || (pos == best_pos && user_defined[i].first.size() > user_defined[best].first.size())) {
        best_pos = pos;
        best = i;
      }
    }
    return {best_pos, best};
  }

  explicit Reference(const Tokenizer& t) : tok(t) {
    const auto& merges = t.vocab().merges;
    ranks.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r)
      ranks.emplace(merges[r].first + '\xff' + merges[r].second, static_cast<int>(r));
    impl.vocab = t.vocab();
    impl.build();
    const Vocab& v = t.vocab();
    for (size_t id = 0; id < v.tokens.size(); ++id)
      if (v.types[id] == TokenType::UserDefined && !v.tokens[id].empty())
        user_defined.emplace_back(v.tokens[id], static_cast<int32_t>(id));
  }

  void naive_bpe(std::string_view word, std::vector<int32_t>& out) const {
    std::vector<std::string> syms;
    for (unsigned char b : word) {
      std::string piece;
      unicode::append_utf8(piece, byte_level::kByteToCp[b]);
      syms.push_back(piece);
    }
    std::string key;
    for (;;) {
      int best_rank = -1;
      size_t best = 0;
      for (size_t k = 0; k + 1 < syms.size(); ++k) {
        key.assign(syms[k]).append(1, '\xff').append(syms[k + 1]);
        auto it = ranks.find(key);
        if (it != ranks.end() && (best_rank < 0 || it->second < best_rank)) {
          best_rank = it->second;
          best = k;
        }
      }
      if (best_rank < 0) break;
      syms[best] += syms[best + 1];
      syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const auto& s : syms) out.push_back(tok.token_id(s).value_or(-1));
  }
};

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

const Reference& reference() {
  static const Reference ref(pocket::fuzz::qwen3_tokenizer());
  return ref;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {  // the slow loads, outside the first input's time limit
  reference();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket::fuzz;
  const Reference& ref = reference();
  const Tokenizer& tok = ref.tok;
  const Vocab& v = tok.vocab();
  const std::string_view text(reinterpret_cast<const char*>(data), std::min<size_t>(size, 2048));

  const std::string fast_nfc = unicode::nfc(text);
  const std::string full_nfc = unicode::nfc_full(text);
  if (fast_nfc != full_nfc) finding("unicode::nfc differs from unicode::nfc_full");
  std::string storage;
  if (unicode::nfc(text, storage) != full_nfc) finding("unicode::nfc (in place) differs from unicode::nfc_full");

  const std::vector<int32_t> fast = tok.encode(text);  // no special-token matching, no BOS

  std::vector<int32_t> slow;
  size_t ends_total = 0;
  Tokenizer::Impl::BpeScratch scratch;
  // The text between user-defined tokens: normalized, pre-tokenized, and
  // each piece merged by the naive loop (and checked linear against heap).
  auto encode_segment = [&](std::string_view segment) {
    const std::string normalized = v.nfc ? unicode::nfc_full(segment) : std::string(segment);
    std::vector<uint32_t> ends;
    pretokenize(v.pre, normalized, ends);
    ends_total += ends.size();
    uint32_t begin = 0;
    for (uint32_t end : ends) {
      const std::string_view word = std::string_view(normalized).substr(begin, end - begin);
      begin = end;
      ref.naive_bpe(word, slow);
      if (word.size() >= 2 && word.size() <= Tokenizer::Impl::kShortWord) {
        std::vector<int32_t> linear, heap;
        ref.impl.bpe_byte_level(word, scratch, linear);
        ref.impl.bpe_byte_level_heap(word, heap);
        if (linear != heap)
          finding(cat("linear merge loop [", ids_string(linear), "] != heap merge loop [", ids_string(heap),
                      "] for a piece of ", word.size(), " bytes"));
      }
    }
  };
  for (size_t at = 0; at < text.size();) {
    const auto [pos, which] = ref.next_user_defined(text, at);
    if (pos == std::string_view::npos) {
      encode_segment(text.substr(at));
      break;
    }
    if (pos > at) encode_segment(text.substr(at, pos - at));
    slow.push_back(ref.user_defined[which].second);
    at = pos + ref.user_defined[which].first.size();
  }
  if (fast != slow)
    finding(cat("encode() [", ids_string(fast), "] != reference BPE [", ids_string(slow), "] (", ends_total,
                " pieces)"));
  return 0;
}
