// Generates src/tokenizer/unicode_tables.cpp from libutf8proc, so that the
// runtime library carries compact tables and has no Unicode dependency.
//
//   g++ -std=c++20 -O2 tools/tokenizer-oracle/gen_unicode_tables.cpp -lutf8proc -o /tmp/gen_unicode_tables
//   /tmp/gen_unicode_tables > src/tokenizer/unicode_tables.cpp
//
// Tables produced (see src/tokenizer/unicode_data.h for their meaning):
//  * a two-stage per-code-point property byte: class (letter / number /
//    White_Space / other) and an "NFC may change text here" flag;
//  * canonical combining classes (ranges), full canonical decompositions
//    (Hangul excluded: algorithmic), and primary composition pairs.
#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kMaxCp = 0x110000;
constexpr uint32_t kBlock = 128;
constexpr uint32_t kSBase = 0xAC00, kSCount = 11172;

bool is_hangul_syllable(uint32_t cp) { return cp >= kSBase && cp < kSBase + kSCount; }

// Unicode White_Space, which is what Rust's regex \s matches.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Letters and digits new in Unicode 15.0. Hugging Face tokenizers (0.21)
// match pre-tokenizer patterns with Oniguruma 6.9.8, whose \p{L} and \p{N}
// are Unicode 14.0: to it these are unassigned, so "x" + U+1E4E0 + "y"
// splits after x (a live-oracle failure, session 22). The ranges are every
// code point whose letter/number class differs between libutf8proc 2.8.0
// (15.0) and Python 3.11's unicodedata (14.0.0); all are new in 15.0.
struct Range { uint32_t first, last; };
constexpr Range kNewIn15[] = {
    {0x1123F, 0x11240}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x11F50, 0x11F59},
    {0x1342F, 0x1342F}, {0x13441, 0x13446}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1D2C0, 0x1D2D3},
    {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB}, {0x1E4F0, 0x1E4F9}, {0x2B739, 0x2B739},
    {0x31350, 0x323AF},
};
// Combining marks new in 15.0 (canonical combining class != 0 in 15.0, 0 as
// unassigned in 14.0): tokenizers' NFC (unicode-normalization-alignments)
// neither reorders nor composes across them, so they stay starters here.
// Found the same way; 15.0 added no canonical decompositions.
constexpr Range kNewMarksIn15[] = {
    {0x10EFD, 0x10EFF}, {0x11F41, 0x11F42}, {0x1E08F, 0x1E08F}, {0x1E4EC, 0x1E4EF},
};
bool in_ranges(uint32_t cp, const Range* begin, const Range* end) {
  for (const Range* r = begin; r != end; ++r)
    if (cp >= r->first && cp <= r->last) return true;
  return false;
}
bool new_in_15(uint32_t cp) { return in_ranges(cp, std::begin(kNewIn15), std::end(kNewIn15)); }
bool new_mark_in_15(uint32_t cp) { return in_ranges(cp, std::begin(kNewMarksIn15), std::end(kNewMarksIn15)); }

std::vector<uint32_t> canonical_decomposition(uint32_t cp) {
  utf8proc_int32_t buf[32];
  int bound = 0;
  utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 32, UTF8PROC_DECOMPOSE, &bound);
  if (n < 0 || n > 32) { std::fprintf(stderr, "decompose failed for U+%04X\n", cp); std::exit(1); }
  return std::vector<uint32_t>(buf, buf + n);
}

std::vector<uint32_t> nfc_of(const std::vector<uint32_t>& cps) {
  std::string s;
  for (uint32_t c : cps) {
    uint8_t b[4];
    utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), b);
    s.append(reinterpret_cast<char*>(b), static_cast<size_t>(n));
  }
  uint8_t* out = utf8proc_NFC(reinterpret_cast<const uint8_t*>(s.c_str()));
  std::vector<uint32_t> r;
  for (const uint8_t* p = out; *p;) {
    utf8proc_int32_t c;
    p += utf8proc_iterate(p, -1, &c);
    r.push_back(static_cast<uint32_t>(c));
  }
  free(out);
  return r;
}

}  // namespace

int main() {
  std::vector<uint8_t> prop(kMaxCp, 0);
  std::vector<uint8_t> ccc(kMaxCp, 0);
  std::map<uint32_t, std::vector<uint32_t>> decomp;         // cp -> full canonical decomposition
  std::map<uint64_t, uint32_t> compose;                     // (a << 21 | b) -> composite
  std::set<uint32_t> nfc_flag;

  for (uint32_t cp = 0; cp < kMaxCp; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    uint8_t cls = 0;
    switch (p->category) {
      case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
      case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: cls = 1; break;
      case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: cls = 2; break;
      default: break;
    }
    if (new_in_15(cp)) cls = 0;  // the pre-tokenizer's classes are Unicode 14.0's (above)
    if (is_white_space(cp)) {
      if (cls != 0) { std::fprintf(stderr, "U+%04X is both space and L/N\n", cp); return 1; }
      cls = 3;
    }
    prop[cp] = cls;
    ccc[cp] = new_mark_in_15(cp) ? 0 : static_cast<uint8_t>(p->combining_class);
    if (ccc[cp] != 0) nfc_flag.insert(cp);
    if (is_hangul_syllable(cp)) continue;
    std::vector<uint32_t> d = canonical_decomposition(cp);
    if (d.size() == 1 && d[0] == cp) continue;
    decomp[cp] = d;
    // Every code point of a decomposition but the first may combine with
    // what precedes it: flag them (a superset of NFC_QC=Maybe).
    for (size_t i = 1; i < d.size(); ++i) nfc_flag.insert(d[i]);
    std::vector<uint32_t> back = nfc_of(d);
    if (back.size() == 1 && back[0] == cp) {
      // A primary composite: pair = (NFC of all but the last, last).
      std::vector<uint32_t> head(d.begin(), d.end() - 1);
      std::vector<uint32_t> first = nfc_of(head);
      if (first.size() != 1) { std::fprintf(stderr, "U+%04X: head does not compose\n", cp); return 1; }
      compose[(uint64_t(first[0]) << 21) | d.back()] = cp;
    } else {
      nfc_flag.insert(cp);  // NFC_QC=No: NFC replaces it
    }
  }
  // Hangul jamo that combine with a preceding syllable or leading jamo.
  for (uint32_t cp = 0x1161; cp <= 0x1175; ++cp) nfc_flag.insert(cp);
  for (uint32_t cp = 0x11A8; cp <= 0x11C2; ++cp) nfc_flag.insert(cp);
  for (uint32_t cp : nfc_flag) prop[cp] |= 4;

  // Two-stage table with deduplicated blocks.
  std::vector<uint16_t> stage1;
  std::vector<std::vector<uint8_t>> blocks;
  std::map<std::vector<uint8_t>, uint16_t> block_index;
  for (uint32_t b = 0; b < kMaxCp / kBlock; ++b) {
    std::vector<uint8_t> blk(prop.begin() + b * kBlock, prop.begin() + (b + 1) * kBlock);
    auto it = block_index.find(blk);
    if (it == block_index.end()) {
      it = block_index.emplace(blk, static_cast<uint16_t>(blocks.size())).first;
      blocks.push_back(blk);
    }
    stage1.push_back(it->second);
  }

  std::printf("// GENERATED by tools/tokenizer-oracle/gen_unicode_tables.cpp from libutf8proc %s\n",
              utf8proc_version());
  std::printf("// (Unicode %s; letter/number classes and combining classes as of 14.0, as\n"
              "// Hugging Face tokenizers has them). Do not edit by hand.\n", utf8proc_unicode_version());
  std::printf("#include \"tokenizer/unicode_data.h\"\n\nnamespace pocket::unicode::tables {\n\n");
  std::printf("const char* const kUnicodeVersion = \"%s\";\n\n", utf8proc_unicode_version());
  std::printf("const uint16_t kPropStage1[%u] = {", kMaxCp / kBlock);
  for (size_t i = 0; i < stage1.size(); ++i) std::printf("%s%u,", i % 24 ? "" : "\n", stage1[i]);
  std::printf("\n};\n\nconst uint8_t kPropStage2[%zu] = {", blocks.size() * kBlock);
  size_t k = 0;
  for (auto& blk : blocks)
    for (uint8_t v : blk) std::printf("%s%u,", k++ % 40 ? "" : "\n", v);
  std::printf("\n};\n\n");

  // Combining classes as ranges of equal non-zero class.
  std::vector<std::array<uint32_t, 3>> ranges;
  for (uint32_t cp = 0; cp < kMaxCp; ++cp) {
    if (!ccc[cp]) continue;
    if (!ranges.empty() && ranges.back()[1] + 1 == cp && ranges.back()[2] == ccc[cp]) ranges.back()[1] = cp;
    else ranges.push_back({cp, cp, ccc[cp]});
  }
  std::printf("const CccRange kCccRanges[%zu] = {", ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i)
    std::printf("%s{0x%X,0x%X,%u},", i % 6 ? "" : "\n", ranges[i][0], ranges[i][1], ranges[i][2]);
  std::printf("\n};\nconst size_t kCccRangeCount = %zu;\n\n", ranges.size());

  std::vector<uint32_t> pool;
  std::printf("const Decomposition kDecompositions[%zu] = {", decomp.size());
  k = 0;
  for (auto& [cp, d] : decomp) {
    std::printf("%s{0x%X,%zu,%zu},", k++ % 6 ? "" : "\n", cp, pool.size(), d.size());
    pool.insert(pool.end(), d.begin(), d.end());
  }
  std::printf("\n};\nconst size_t kDecompositionCount = %zu;\n\n", decomp.size());
  std::printf("const uint32_t kDecompositionPool[%zu] = {", pool.size());
  for (size_t i = 0; i < pool.size(); ++i) std::printf("%s0x%X,", i % 10 ? "" : "\n", pool[i]);
  std::printf("\n};\n\n");

  std::printf("const Composition kCompositions[%zu] = {", compose.size());
  k = 0;
  for (auto& [key, c] : compose) std::printf("%s{0x%llXull,0x%X},", k++ % 4 ? "" : "\n", (unsigned long long)key, c);
  std::printf("\n};\nconst size_t kCompositionCount = %zu;\n\n}  // namespace pocket::unicode::tables\n",
              compose.size());
  std::fprintf(stderr, "%zu blocks, %zu ccc ranges, %zu decompositions (%zu cps), %zu compositions\n",
               blocks.size(), ranges.size(), decomp.size(), pool.size(), compose.size());
  return 0;
}
