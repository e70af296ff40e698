#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "util/utf8.h"

namespace pocket::unicode {
namespace {

// Hangul syllable algorithm constants (Unicode ch. 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(uint32_t cp) {
  if (cp >= 0x110000 || !nfc_may_change(cp)) return 0;  // only flagged code points can have ccc != 0
  const auto* end = tables::kCccRanges + tables::kCccRangeCount;
  auto it = std::upper_bound(tables::kCccRanges, end, cp,
                             [](uint32_t v, const tables::CccRange& r) { return v < r.first; });
  if (it == tables::kCccRanges) return 0;
  --it;
  return cp <= it->last ? static_cast<uint8_t>(it->ccc) : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0 && cp < 0x110000) {  // nothing below U+00C0 decomposes
    const auto* end = tables::kDecompositions + tables::kDecompositionCount;
    auto it = std::lower_bound(tables::kDecompositions, end, cp,
                               [](const tables::Decomposition& d, uint32_t v) { return d.cp < v; });
    if (it != end && it->cp == cp) {
      out.insert(out.end(), tables::kDecompositionPool + it->offset,
                 tables::kDecompositionPool + it->offset + it->length);
      return;
    }
  }
  out.push_back(cp);
}

// Composite of (a, b), or 0 if they do not compose.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  if (a >= 0x110000 || b >= 0x110000) return 0;
  const uint64_t key = (uint64_t(a) << 21) | b;
  const auto* end = tables::kCompositions + tables::kCompositionCount;
  auto it = std::lower_bound(tables::kCompositions, end, key,
                             [](const tables::Composition& c, uint64_t k) { return c.key < k; });
  return it != end && it->key == key ? it->composite : 0;
}

// NFC of a chunk, the whole algorithm: decomposition, ordering, composition.
void nfc_chunk(std::string_view s, std::string& r) {
  // 1. Full canonical decomposition.
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    decompose(decode(s, i, len), cps);
    i += len;
  }
  // 2. Canonical ordering: stable sort each run of non-starters by class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j,
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // 3. Canonical composition.
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;  // index in out of the last starter
  int last_ccc = -1;          // class of the last character appended after the starter
  for (uint32_t cp : cps) {
    const int ccc = combining_class(cp);
    if (starter != SIZE_MAX) {
      // cp is not blocked from the starter if nothing in between has class
      // 0 or >= ccc (or nothing is in between at all).
      const bool adjacent = out.size() == starter + 1;
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        if (uint32_t c = compose_pair(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = out.size();
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
    if (ccc == 0) last_ccc = -1;
  }
  for (uint32_t cp : out) append_utf8(r, cp);
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x110000) {
    utf8::append(out, cp);
  } else {
    out.push_back(static_cast<char>(cp - kInvalidBase));  // pseudo code point: the raw byte
  }
}

size_t complete_utf8_prefix(std::string_view s, size_t* incomplete_tail) {
  *incomplete_tail = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (decode(s, i, len) >= kInvalidBase) break;
    i += len;
  }
  if (i == s.size()) return i;
  // s[i] starts no valid sequence here. It may still be the start of one
  // that the end of s cut short: check every byte present so far.
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  const unsigned c = p[0];
  const size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (need == 0 || left >= need) return i;
  for (size_t k = 1; k < left; ++k) {
    unsigned lo = 0x80, hi = 0xBF;
    if (k == 1) {  // second-byte limits exclude overlongs, surrogates and > U+10FFFF
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (p[k] < lo || p[k] > hi) return i;
  }
  *incomplete_tail = left;
  return i;
}

namespace {

// Position of the first code point at or after i that NFC may change
// (s.size() if none); `stable` is set to the start of the last code point
// before it that NFC cannot touch (or left as is if there is none).
size_t next_unstable(std::string_view s, size_t i, size_t& stable) {
  const size_t n = s.size();
  while (i < n) {
    // ASCII never changes under NFC; skip it eight bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (!(w & 0x8080808080808080ull)) {
        stable = i + 7;
        i += 8;
        continue;
      }
    }
    size_t len;
    const uint32_t cp = decode(s, i, len);
    if (cp < kInvalidBase && nfc_may_change(cp)) return i;
    stable = i;
    i += len;
  }
  return n;
}

}  // namespace

bool nfc_quick_check(std::string_view s) {
  size_t stable = 0;
  return next_unstable(s, 0, stable) == s.size();
}

// NFC(xy) == NFC(x) NFC(y) whenever y starts with a code point that NFC
// cannot touch (its flag is clear: a starter that never composes with what
// precedes it). So only the chunks from the last such code point before a
// flagged one up to the next such code point go through the full algorithm;
// the rest is copied.
std::string_view nfc(std::string_view s, std::string& storage) {
  size_t stable = 0;
  size_t i = next_unstable(s, 0, stable);
  if (i == s.size()) return s;
  storage.clear();
  storage.reserve(s.size() + s.size() / 8);
  size_t copied = 0;
  while (i < s.size()) {
    const size_t chunk = std::max(stable, copied);
    storage.append(s.data() + copied, chunk - copied);
    // Extend past every code point NFC may change.
    size_t end = i, len;
    while (end < s.size()) {
      const uint32_t cp = decode(s, end, len);
      if (cp >= kInvalidBase || !nfc_may_change(cp)) break;
      end += len;
    }
    nfc_chunk(s.substr(chunk, end - chunk), storage);
    copied = end;
    stable = end;
    i = next_unstable(s, end, stable);
  }
  storage.append(s.data() + copied, s.size() - copied);
  return storage;
}

std::string nfc_full(std::string_view s) {
  std::string r;
  nfc_chunk(s, r);
  return r;
}

std::string nfc(std::string_view s) {
  std::string storage;
  const std::string_view r = nfc(s, storage);
  if (r.data() != storage.data()) return std::string(s);
  return storage;
}

}  // namespace pocket::unicode
