// Flat open-addressing tables for the tokenizer's hot lookups: string -> id
// (pieces, token bytes) and (left id, right id) -> (rank, merged id). They
// are built once per Tokenizer and only read afterwards, so encode() is safe
// to call from many threads.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace pocket::tok_detail {

inline uint64_t hash_bytes(std::string_view s) {
  // 64-bit multiply-mix over 8-byte words; quality is ample for vocab pieces.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap < n + n / 2) cap <<= 1;  // load factor <= 2/3
  return cap;
}

// Maps strings (owned elsewhere, indexed by id) to ids. The first id inserted
// for a string wins. Slots keep 32 hash bits so that misses and collisions
// rarely touch the strings themselves.
class StringIdMap {
 public:
  void build(const std::vector<std::string>* keys, const std::vector<int32_t>& ids) {
    keys_ = keys;
    slots_.assign(table_capacity(ids.size()), Slot{});
    for (int32_t id : ids) insert(id);
  }
  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(s);
    const auto tag = static_cast<uint32_t>(h >> 32);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (slot.tag == tag && (*keys_)[slot.id] == s) return slot.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;
  };
  void insert(int32_t id) {
    const std::string& s = (*keys_)[id];
    const uint64_t h = hash_bytes(s);
    const auto tag = static_cast<uint32_t>(h >> 32);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = {tag, id};
        return;
      }
      if (slot.tag == tag && (*keys_)[slot.id] == s) return;
    }
  }
  const std::vector<std::string>* keys_ = nullptr;
  std::vector<Slot> slots_;
};

// (left id, right id) -> (merge rank, merged id).
class PairMap {
 public:
  struct Value {
    int32_t rank = -1;
    int32_t merged = -1;
  };
  void reserve(size_t n) { slots_.assign(table_capacity(n), Slot{}); }
  // Returns false if the pair is already present (the earlier rank is kept).
  bool insert(int32_t left, int32_t right, Value v) {
    const uint64_t key = make_key(left, right);
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, v};
        return true;
      }
      if (slots_[i].key == key) return false;
    }
  }
  // Starts loading the slot of (left, right) so that a later find() hits
  // the cache: the first lookups of a word are independent of each other.
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[mix(make_key(left, right)) & (slots_.size() - 1)]);
  }
  Value find(int32_t left, int32_t right) const {
    if (slots_.empty()) return {};
    const uint64_t key = make_key(left, right);
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    Value value;
  };
  static uint64_t make_key(int32_t l, int32_t r) {
    return (uint64_t(uint32_t(l)) << 32) | uint32_t(r);
  }
  static uint64_t mix(uint64_t k) {  // MurmurHash3's finalizer: every key bit reaches the low bits
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    return k ^ (k >> 33);
  }
  std::vector<Slot> slots_;
};

}  // namespace pocket::tok_detail
