// GPT-2's reversible byte <-> unicode map used by byte-level BPE vocabularies:
// printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100..
// in byte order (so ' ' becomes 'Ġ' U+0120 and '\n' becomes 'Ċ' U+010A).
#pragma once
#include <array>
#include <cstdint>

namespace pocket::byte_level {

constexpr bool is_printable_latin1(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint16_t, 256> make_byte_to_cp() {
  std::array<uint16_t, 256> m{};
  unsigned next = 0x100;
  for (unsigned b = 0; b < 256; ++b) m[b] = static_cast<uint16_t>(is_printable_latin1(b) ? b : next++);
  return m;
}

inline constexpr std::array<uint16_t, 256> kByteToCp = make_byte_to_cp();

constexpr std::array<int16_t, 0x100 + 68> make_cp_to_byte() {
  std::array<int16_t, 0x100 + 68> m{};
  for (auto& v : m) v = -1;
  for (unsigned b = 0; b < 256; ++b) m[make_byte_to_cp()[b]] = static_cast<int16_t>(b);
  return m;
}

inline constexpr std::array<int16_t, 0x100 + 68> kCpToByte = make_cp_to_byte();

// The byte a mapped code point stands for, or -1 if cp is not in the map.
constexpr int cp_to_byte(uint32_t cp) { return cp < kCpToByte.size() ? kCpToByte[cp] : -1; }

}  // namespace pocket::byte_level
