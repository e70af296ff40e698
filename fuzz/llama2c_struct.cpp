// fuzz_llama2c_struct: the fuzz_llama2c target (checkpoint + tokenizer.bin,
// opened as `pocket run -m model.bin` does) with a header-aware mutator. A
// llama2.c checkpoint is 7 int32 counts (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size with a negative value meaning an unshared
// classifier in the legacy form, seq_len), after "ak42", a version and
// before a shared-classifier byte in the v1 form, then bare float32 arrays
// whose total the loader checks against the file size. Byte flips in the
// counts nearly always fail that check. This mutator changes one to three
// counts (to an edge of the loader's ranges, 0, ±1, INT32_MIN/MAX, doubled,
// halved, negated), the version or the shared byte, or switches the header
// between the two forms, and then half the time makes the file length
// follow (the weights cut or extended to the size the new header implies,
// when that fits), otherwise leaves it or moves it by a few bytes. One
// mutation in eight is libFuzzer's own, so the tokenizer part and the
// separators stay fuzzed too.
#include <cstring>
#include <random>

#include "llama2c.cpp"  // the target itself; this file adds only the mutator

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr uint32_t kMagicV1 = 0x616b3432;  // "ak42"
constexpr size_t kLegacyHeader = 28, kV1Header = 256, kCountsV1 = 8;

// The bytes of float32 weights a header implies (the loader's layout: legacy
// adds the two RoPE tables, unshared adds the classifier); 0 when the counts
// cannot describe a model (or the size passes `limit`).
uint64_t implied_size(const int32_t f[7], bool v1, bool shared, uint64_t limit) {
  using U = unsigned __int128;  // every product below fits: each count is < 2^32
  if (f[0] <= 0 || f[1] <= 0 || f[2] <= 0 || f[3] <= 0 || f[4] <= 0 || f[5] == 0 || f[6] <= 0 || f[0] % f[3]) return 0;
  const U dim = static_cast<U>(f[0]), hid = static_cast<U>(f[1]), layers = static_cast<U>(f[2]),
          kv_heads = static_cast<U>(f[4]), seq = static_cast<U>(f[6]);
  const U vocab = f[5] < 0 ? static_cast<U>(-int64_t{f[5]}) : static_cast<U>(f[5]);
  const U hd = static_cast<U>(f[0] / f[3]), kv = hd * kv_heads;
  U n = vocab * dim;                                                  // embedding
  n += layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hid * dim);  // norms, attention, FFN
  n += dim;                                                           // final norm
  if (!v1) n += 2 * seq * (hd / 2);                                   // freq_cis real and imaginary
  if (!shared) n += vocab * dim;                                      // classifier
  n = n * 4 + (v1 ? kV1Header : kLegacyHeader);
  return n > limit ? 0 : static_cast<uint64_t>(n);
}

int32_t hostile_count(std::mt19937_64& rng, int32_t v) {
  static const int64_t kEdges[] = {0, 1, 2, -1, INT32_MIN, INT32_MIN + 1, INT32_MAX, 1 << 16, (1 << 16) + 1, 1 << 18,
                                   (1 << 18) + 1, 1 << 22, (1 << 22) + 1, 1024, 1025, 3, 7};
  const int64_t w = v;
  switch (rng() % 6) {
    case 0:
    case 1: return static_cast<int32_t>(kEdges[rng() % std::size(kEdges)]);
    case 2: return static_cast<int32_t>(w + static_cast<int64_t>(rng() % 5) - 2);
    case 3: return static_cast<int32_t>(static_cast<uint32_t>(w) * 2);
    case 4: return static_cast<int32_t>(w / 2);
    default: return static_cast<int32_t>(0u - static_cast<uint32_t>(w));
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  using namespace pocket::fuzz;
  std::mt19937_64 rng(seed);
  if (rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<std::string_view> parts = split_parts(data, size, 2);
  const std::string_view ckpt = parts[0];
  uint32_t magic = 0;
  if (ckpt.size() >= 4) std::memcpy(&magic, ckpt.data(), 4);
  bool v1 = magic == kMagicV1;
  if (ckpt.size() < (v1 ? kV1Header : kLegacyHeader)) return LLVMFuzzerMutate(data, size, max_size);
  int32_t f[7];
  std::memcpy(f, ckpt.data() + (v1 ? kCountsV1 : 0), sizeof(f));
  int32_t version = 1;
  if (v1) std::memcpy(&version, ckpt.data() + 4, 4);
  bool shared = v1 ? ckpt[kCountsV1 + sizeof(f)] != 0 : f[5] > 0;
  std::string weights(ckpt.substr(v1 ? kV1Header : kLegacyHeader));

  // The legacy form keeps "unshared" in the sign of vocab_size; v1 in a byte.
  auto negate = [](int32_t v) { return static_cast<int32_t>(0u - static_cast<uint32_t>(v)); };
  auto magnitude = [&](int32_t v) { return v < 0 ? negate(v) : v; };
  for (int k = 1 + static_cast<int>(rng() % 3); k; --k) {
    switch (rng() % 8) {
      case 0:  // the other header form, same counts
        if (v1) {
          f[5] = shared ? magnitude(f[5]) : negate(magnitude(f[5]));
        } else {
          shared = f[5] > 0;
          f[5] = magnitude(f[5]);
        }
        v1 = !v1;
        break;
      case 1:  // the classifier: shared or not
        if (v1) shared = !shared;
        else f[5] = negate(f[5]);
        break;
      case 2:  // an unsupported or negative version
        if (v1) version = static_cast<int32_t>(rng() % 4) - 1;
        break;
      default: {
        const size_t i = rng() % 7;
        f[i] = hostile_count(rng, f[i]);
        break;
      }
    }
  }
  if (!v1) shared = f[5] > 0;

  std::string header(v1 ? kV1Header : kLegacyHeader, '\0');
  if (v1) {
    std::memcpy(header.data(), &kMagicV1, 4);
    std::memcpy(header.data() + 4, &version, 4);
    std::memcpy(header.data() + kCountsV1, f, sizeof(f));
    header[kCountsV1 + sizeof(f)] = shared ? 1 : 0;
  } else {
    std::memcpy(header.data(), f, sizeof(f));
  }
  const size_t rest = parts[1].empty() ? 0 : kPartSeparator.size() + parts[1].size();
  switch (rng() % 4) {
    case 0:
    case 1: {  // the length follows the new header
      const uint64_t want = implied_size(f, v1, shared, max_size > rest ? max_size - rest : 0);
      if (want >= header.size()) {
        const size_t old = weights.size();
        weights.resize(want - header.size());
        for (size_t i = old; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 131 + 7);
      }
      break;
    }
    case 2:  // a few bytes more or fewer
      if (const size_t d = rng() % 9; weights.size() + d >= 4) weights.resize(weights.size() + d - 4);
      break;
    default:  // unchanged
      break;
  }
  std::string out = header + weights;
  if (!parts[1].empty()) {
    out += kPartSeparator;
    out += parts[1];
  }
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
