// The n-gram cache file for the lookup drafter: for each context of n
// tokens seen in a corpus, the continuation that most often followed it
// (up to `cont` tokens), so `--draft lookup` can draft text that is not in
// the prompt (boilerplate, code idioms, a domain's phrases). Bounded: only
// the `max_entries` most frequent contexts are kept.
//
// File (little-endian): "PNGC", u32 version, u32 vocab size, u32 n,
// u32 cont, u64 entries, then per entry n context ids, u32 count, u8 length
// and `cont` ids (unused ones 0); last a u64 checksum (util/hash64.h) of all
// that precedes it. Every size is checked against the file before anything
// is allocated; ids past the vocabulary, a bad length or checksum, a
// truncated file each give one clear error. Written via temporary + rename.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace pocket {

class NgramCache {
 public:
  static constexpr int kMaxN = 8, kMaxCont = 32;
  NgramCache(int vocab_size, int n, int cont);

  // Counts every context of n tokens in `tokens` and what followed it.
  void add(std::span<const int32_t> tokens);
  // Keeps the `max_entries` most frequent contexts (ties: lower ids first).
  void prune(size_t max_entries);

  // The continuation stored for the last n tokens of `history` (empty when
  // none or the history is shorter than n), at most `max` tokens.
  std::span<const int32_t> lookup(std::span<const int32_t> history, int max) const;

  void save(const std::string& path) const;
  // Throws pocket::Error naming `path` and the problem; `vocab_size` is the
  // model's, which the file must match.
  static NgramCache load(const std::string& path, int vocab_size);

  int n() const { return n_; }
  int cont() const { return cont_; }
  int vocab_size() const { return vocab_; }
  size_t size() const { return map_.size(); }

 private:
  struct Entry {
    uint32_t count = 0;
    std::vector<int32_t> next;  // the continuation kept (most frequent first token)
  };
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& k) const;
  };
  int vocab_, n_, cont_;
  std::unordered_map<std::vector<int32_t>, Entry, KeyHash> map_;
  // While building: per context, counts of each first next token.
  std::unordered_map<std::vector<int32_t>, std::unordered_map<int32_t, uint32_t>, KeyHash> firsts_;
};

}  // namespace pocket
