#include "formats/content_hash.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "util/thread_pool.h"

namespace pocket {

namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

uint64_t mix(uint64_t h) {  // MurmurHash3's 64-bit finalizer
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

// Four independent lanes of multiply-rotate over 8-byte words (so the loop is
// not one long dependency chain), a tail, then the lanes and length mixed.
uint64_t hash64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull, seed ^ 0xA4093822299F31D0ull,
                      seed ^ 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = rotl(lane[k] ^ (w * kMul), 29) * kMul;
    }
  uint64_t tail = 0;
  for (size_t j = i; j < n; ++j) tail = (tail << 8 | p[j]) * 0x100000001B3ull + j;
  uint64_t h = mix(n ^ tail);
  for (uint64_t l : lane) h = mix(h ^ mix(l));
  return h;
}

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string model_content_hash(const ModelFile& f, const Vocab& v, ThreadPool* pool) {
  std::vector<const std::pair<const std::string, TensorView>*> tensors;
  for (const auto& kv : f.tensors)  // std::map: name order
    if (kv.first.rfind("head.", 0) != 0) tensors.push_back(&kv);
  std::vector<uint64_t> parts(tensors.size());
  auto one = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto& [name, t] = *tensors[static_cast<size_t>(i)];
      std::string head = name + "|" + std::to_string(static_cast<int>(t.type)) + "|" + std::to_string(t.group);
      for (int64_t d : t.shape) head += "|" + std::to_string(d);
      parts[static_cast<size_t>(i)] = hash64(t.data, t.nbytes, hash64(head.data(), head.size()));
    }
  };
  if (pool)
    pool->parallel_for(static_cast<int64_t>(tensors.size()), one);
  else
    one(0, static_cast<int64_t>(tensors.size()), 0);
  std::string vocab;
  for (const std::string& tok : v.tokens) vocab += tok + '\x1f';
  parts.push_back(hash64(vocab.data(), vocab.size(), 7));
  return hex64(hash64(parts.data(), parts.size() * sizeof(uint64_t), 0x504f434b4554ull));
}

}  // namespace pocket
