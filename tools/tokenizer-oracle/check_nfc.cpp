// Checks Pocket's NFC and character classes (src/tokenizer/unicode.cpp and the
// generated tables) against libutf8proc: every code point alone, and random
// sequences mixing starters, combining marks and Hangul jamo.
//
//   g++ -std=c++20 -O2 -Isrc tools/tokenizer-oracle/check_nfc.cpp src/tokenizer/unicode.cpp
//       src/tokenizer/unicode_tables.cpp -lutf8proc -o /tmp/check_nfc && /tmp/check_nfc
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace {

std::string ref_nfc(const std::string& s) {
  uint8_t* out = utf8proc_NFC(reinterpret_cast<const uint8_t*>(s.c_str()));
  std::string r(reinterpret_cast<char*>(out));
  free(out);
  return r;
}

std::string hex(const std::string& s) {
  std::string r;
  char b[4];
  for (unsigned char c : s) { std::snprintf(b, sizeof b, "%02X ", c); r += b; }
  return r;
}

}  // namespace

int main() {
  using namespace pocket::unicode;
  std::vector<uint32_t> interesting;  // code points NFC can touch
  long bad = 0, checked = 0;
  for (uint32_t cp = 1; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    append_utf8(s, cp);
    const std::string want = ref_nfc(s), got = nfc(s);
    ++checked;
    if (want != got) {
      if (++bad < 20) std::printf("U+%04X: want %s got %s\n", cp, hex(want).c_str(), hex(got).c_str());
    }
    if (want != s && nfc_quick_check(s)) { ++bad; std::printf("quick check wrong at U+%04X\n", cp); }
    if (nfc_may_change(cp) || (cp >= 0xAC00 && cp < 0xAC00 + 11172 && cp % 97 == 0)) interesting.push_back(cp);
  }
  std::mt19937 rng(42);
  const uint32_t starters[] = {'a', 'e', 'A', 'o', 'u', 0x3B1, 0x1100, 0x1161, 0xAC00, 0x0B47, 0x0915, 0x05D0};
  for (int t = 0; t < 300000; ++t) {
    std::string s;
    const int n = 1 + rng() % 7;
    for (int k = 0; k < n; ++k) {
      uint32_t cp = rng() % 3 ? interesting[rng() % interesting.size()] : starters[rng() % std::size(starters)];
      append_utf8(s, cp);
    }
    const std::string want = ref_nfc(s), got = nfc(s);
    ++checked;
    if (want != got && ++bad < 40)
      std::printf("in %s: want %s got %s\n", hex(s).c_str(), hex(want).c_str(), hex(got).c_str());
    if (want != s && nfc_quick_check(s)) { ++bad; std::printf("quick check wrong for %s\n", hex(s).c_str()); }
  }
  std::printf("%ld strings checked, %ld mismatches, %zu code points flagged\n", checked, bad, interesting.size());
  return bad ? 1 : 0;
}
