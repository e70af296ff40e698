#include "speculative/ngram_cache.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash64.h"

namespace pocket {

namespace {

constexpr char kMagic[4] = {'P', 'N', 'G', 'C'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 4 + 4 * 4 + 8;

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const std::string& in, size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

size_t NgramCache::KeyHash::operator()(const std::vector<int32_t>& k) const {
  Hash64 h;
  h.update(k.data(), k.size() * sizeof(int32_t));
  return static_cast<size_t>(h.digest());
}

NgramCache::NgramCache(int vocab_size, int n, int cont) : vocab_(vocab_size), n_(n), cont_(cont) {
  if (vocab_size < 1) fail_as(ErrorCode::InvalidArgument, "n-gram cache: vocabulary size ", vocab_size, " must be >= 1");
  if (n < 1 || n > kMaxN) fail_as(ErrorCode::InvalidArgument, "n-gram cache: context length ", n, " must be 1..", kMaxN);
  if (cont < 1 || cont > kMaxCont)
    fail_as(ErrorCode::InvalidArgument, "n-gram cache: continuation length ", cont, " must be 1..", kMaxCont);
}

void NgramCache::add(std::span<const int32_t> tokens) {
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab_) fail_as(ErrorCode::InvalidArgument, "n-gram cache: token id ", t, " is outside the vocabulary");
  std::vector<int32_t> key(static_cast<size_t>(n_));
  for (size_t i = static_cast<size_t>(n_); i < tokens.size(); ++i) {
    key.assign(tokens.begin() + static_cast<ptrdiff_t>(i - n_), tokens.begin() + static_cast<ptrdiff_t>(i));
    const int32_t t = tokens[i];
    auto& firsts = firsts_[key];
    const uint32_t c = ++firsts[t];
    Entry& e = map_[key];
    ++e.count;
    const size_t len = std::min(tokens.size() - i, static_cast<size_t>(cont_));
    const bool better = e.next.empty() || (e.next[0] != t && c > firsts[e.next[0]]) || (e.next[0] == t && len > e.next.size());
    if (better) e.next.assign(tokens.begin() + static_cast<ptrdiff_t>(i), tokens.begin() + static_cast<ptrdiff_t>(i + len));
  }
}

void NgramCache::prune(size_t max_entries) {
  firsts_.clear();
  if (map_.size() <= max_entries) return;
  std::vector<std::pair<uint32_t, const std::vector<int32_t>*>> order;
  order.reserve(map_.size());
  for (const auto& [k, e] : map_) order.emplace_back(e.count, &k);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  decltype(map_) kept;
  for (size_t i = 0; i < max_entries; ++i) kept.emplace(*order[i].second, map_.at(*order[i].second));
  map_ = std::move(kept);
}

std::span<const int32_t> NgramCache::lookup(std::span<const int32_t> history, int max) const {
  if (max <= 0 || history.size() < static_cast<size_t>(n_)) return {};
  const std::vector<int32_t> key(history.end() - n_, history.end());
  auto it = map_.find(key);
  if (it == map_.end()) return {};
  const auto& next = it->second.next;
  return std::span<const int32_t>(next.data(), std::min(next.size(), static_cast<size_t>(max)));
}

void NgramCache::save(const std::string& path) const {
  std::vector<const std::vector<int32_t>*> keys;
  for (const auto& [k, e] : map_) keys.push_back(&k);
  std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
  std::string out(kMagic, 4);
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(vocab_));
  put<uint32_t>(out, static_cast<uint32_t>(n_));
  put<uint32_t>(out, static_cast<uint32_t>(cont_));
  put<uint64_t>(out, keys.size());
  for (const auto* k : keys) {
    const Entry& e = map_.at(*k);
    for (int32_t t : *k) put<int32_t>(out, t);
    put<uint32_t>(out, e.count);
    put<uint8_t>(out, static_cast<uint8_t>(e.next.size()));
    for (int i = 0; i < cont_; ++i) put<int32_t>(out, i < static_cast<int>(e.next.size()) ? e.next[static_cast<size_t>(i)] : 0);
  }
  Hash64 h;
  h.update(out.data(), out.size());
  put<uint64_t>(out, h.digest());
  write_file_atomically(path, [&](std::ostream& os) { os.write(out.data(), static_cast<std::streamsize>(out.size())); });
}

NgramCache NgramCache::load(const std::string& path, int vocab_size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open the n-gram cache file");
  const std::string in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (in.size() < kHeader + 8 || std::memcmp(in.data(), kMagic, 4) != 0)
    fail(path, ": not an n-gram cache file (made by pocket ngram-build)");
  size_t at = 4;
  const uint32_t version = get<uint32_t>(in, at), vocab = get<uint32_t>(in, at), n = get<uint32_t>(in, at),
                 cont = get<uint32_t>(in, at);
  const uint64_t entries = get<uint64_t>(in, at);
  if (version != kVersion) fail(path, ": n-gram cache version ", version, " (this build reads ", kVersion, ")");
  if (vocab != static_cast<uint32_t>(vocab_size))
    fail(path, ": the n-gram cache was built for a vocabulary of ", vocab, " tokens, the model has ", vocab_size);
  if (n < 1 || n > kMaxN || cont < 1 || cont > kMaxCont)
    fail(path, ": n-gram cache context ", n, " / continuation ", cont, " out of range (1..", kMaxN, " / 1..", kMaxCont, ")");
  const uint64_t entry_size = 4ull * n + 4 + 1 + 4ull * cont;
  if (entries > (in.size() - kHeader - 8) / entry_size || kHeader + entries * entry_size + 8 != in.size())
    fail(path, ": n-gram cache file is ", in.size(), " bytes, but its header announces ", entries,
         " entries (truncated or damaged)");
  Hash64 h;
  h.update(in.data(), in.size() - 8);
  size_t sum_at = in.size() - 8;
  if (get<uint64_t>(in, sum_at) != h.digest()) fail(path, ": n-gram cache checksum mismatch (damaged file)");
  NgramCache c(static_cast<int>(vocab), static_cast<int>(n), static_cast<int>(cont));
  std::vector<int32_t> key(n);
  for (uint64_t e = 0; e < entries; ++e) {
    for (auto& t : key) t = get<int32_t>(in, at);
    Entry en;
    en.count = get<uint32_t>(in, at);
    const uint8_t len = get<uint8_t>(in, at);
    if (len < 1 || len > cont) fail(path, ": n-gram cache entry ", e, " has continuation length ", int{len}, " (1..", cont, ")");
    for (uint32_t i = 0; i < cont; ++i) {
      const int32_t t = get<int32_t>(in, at);
      if (i < len) en.next.push_back(t);
    }
    for (int32_t t : key)
      if (t < 0 || t >= vocab_size) fail(path, ": n-gram cache entry ", e, " has token id ", t, " outside the vocabulary");
    for (int32_t t : en.next)
      if (t < 0 || t >= vocab_size) fail(path, ": n-gram cache entry ", e, " has token id ", t, " outside the vocabulary");
    if (!c.map_.emplace(key, std::move(en)).second) fail(path, ": n-gram cache entry ", e, " repeats a context");
  }
  return c;
}

}  // namespace pocket
