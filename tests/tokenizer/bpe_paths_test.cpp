// The byte-level BPE has two merge loops (a linear scan for words of up to
// 64 bytes, a heap for longer ones) and a dense table for pairs of raw
// bytes. Both must give exactly what plain BPE gives: here a naive reference
// written from the definition (repeatedly merge the adjacent pair of lowest
// merge rank, leftmost first, working on the vocab's piece strings) is
// compared with encode() on random single pre-token words of 1 to 200 bytes.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/qwen3_tokenizer.h"
#include "common/test_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace pocket {
namespace {

class NaiveBpe {
 public:
  explicit NaiveBpe(const Tokenizer& tok) : tok_(tok) {
    const auto& merges = tok.vocab().merges;
    for (size_t r = 0; r < merges.size(); ++r) ranks_.emplace(merges[r], static_cast<int>(r));  // first rank wins
  }

  std::vector<int32_t> encode(const std::string& word) const {
    std::vector<std::string> syms;
    for (unsigned char b : word) {
      std::string piece;
      unicode::append_utf8(piece, byte_level::kByteToCp[b]);
      syms.push_back(piece);
    }
    for (;;) {
      int best_rank = -1;
      size_t best = 0;
      for (size_t k = 0; k + 1 < syms.size(); ++k) {
        auto it = ranks_.find({syms[k], syms[k + 1]});
        if (it != ranks_.end() && (best_rank < 0 || it->second < best_rank)) {
          best_rank = it->second;
          best = k;
        }
      }
      if (best_rank < 0) break;
      syms[best] += syms[best + 1];
      syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    std::vector<int32_t> ids;
    for (const auto& s : syms) ids.push_back(tok_.token_id(s).value_or(-1));
    return ids;
  }

 private:
  const Tokenizer& tok_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
};

TEST(BytePairEncoding, FastPathsMatchNaiveBpe) {
  const auto tok = test::qwen3_tokenizer();
  const NaiveBpe naive(*tok);
  // Letters only (\p{L}), so every word is one pre-token; all are NFC-stable.
  std::vector<std::string> letters;
  const std::string pool =
      "的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要她出也得里后自以会家可下而过天去能对小多然于心学"
      "么之都好看起发当没成只如事把还用第样道想作种开美总从无情己面最女但现前些所同日手又行意动酒店房间服务早餐"
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéñüßжыяλ";
  for (size_t i = 0; i < pool.size();) {
    size_t len;
    unicode::decode(pool, i, len);
    letters.push_back(pool.substr(i, len));
    i += len;
  }
  const size_t cjk = 108;  // the first 108 pool letters are CJK
  test::Rng rng(11);
  size_t long_words = 0;
  for (int iter = 0; iter < 600; ++iter) {
    // Mostly CJK or mostly Latin runs, like real text; some long ones.
    const size_t chars = 1 + rng.next() % (iter % 4 == 0 ? 70 : 20);
    const bool latin = rng.next() % 2;
    std::string word;
    for (size_t k = 0; k < chars; ++k) {
      const size_t pick = latin && rng.next() % 8 ? cjk + rng.next() % (letters.size() - cjk) : rng.next() % letters.size();
      word += letters[pick];
    }
    long_words += word.size() > 64;
    ASSERT_EQ(tok->encode(word), naive.encode(word)) << "word \"" << word << "\" (" << word.size() << " bytes)";
  }
  EXPECT_GT(long_words, 50u);  // the heap path is exercised too
}

}  // namespace
}  // namespace pocket
