// Pocket's compact binary tokenizer form (all integers little-endian):
//   "PKTK" u32 version(1)
//   u8 kind, u8 pre-tokenizer, u8 flags (1 nfc, 2 add_space_prefix, 4 add_bos,
//   8 ignore_merges), u8 has_scores
//   i32 bos, eos, pad, unk
//   u32 n_tokens, u32 n_eos, i32 eos_ids[n_eos]
//   u64 pool_bytes, pool (all pieces concatenated), u32 piece_end[n_tokens]
//   u8 types[n_tokens], f32 scores[n_tokens] if has_scores
//   u32 n_merges, (i32 left id, i32 right id, i32 merged id)[n_merges]
// Merges are stored as token ids, so loading parses no strings; the result
// goes through Tokenizer::create, which validates everything again.
#include <cstring>

#include "tokenizer/tokenizer_impl.h"
#include "util/byte_reader.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {
namespace {

constexpr char kMagic[4] = {'P', 'K', 'T', 'K'};
constexpr uint32_t kVersion = 1;
constexpr const char* kSource = "tokenizer binary";

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Reads `count` elements of `elem_size` bytes after checking they fit.
const uint8_t* array(ByteReader& r, uint64_t count, uint64_t elem_size, const char* field) {
  return r.bytes(checked_mul(count, elem_size, field), field);
}

}  // namespace

std::vector<uint8_t> Tokenizer::serialize() const {
  const Vocab& v = impl_->vocab;
  std::vector<uint8_t> out(kMagic, kMagic + 4);
  put<uint32_t>(out, kVersion);
  put<uint8_t>(out, static_cast<uint8_t>(v.kind));
  put<uint8_t>(out, static_cast<uint8_t>(v.pre));
  put<uint8_t>(out, (v.nfc ? 1 : 0) | (v.add_space_prefix ? 2 : 0) | (v.add_bos ? 4 : 0) | (v.ignore_merges ? 8 : 0));
  put<uint8_t>(out, v.scores.empty() ? 0 : 1);
  for (int32_t id : {v.bos_id, v.eos_id, v.pad_id, v.unk_id}) put<int32_t>(out, id);
  put<uint32_t>(out, static_cast<uint32_t>(v.tokens.size()));
  put<uint32_t>(out, static_cast<uint32_t>(v.eos_ids.size()));
  for (int32_t id : v.eos_ids) put<int32_t>(out, id);
  uint64_t pool = 0;
  for (const auto& t : v.tokens) pool += t.size();
  put<uint64_t>(out, pool);
  for (const auto& t : v.tokens) out.insert(out.end(), t.begin(), t.end());
  uint32_t end = 0;
  for (const auto& t : v.tokens) put<uint32_t>(out, end += static_cast<uint32_t>(t.size()));
  for (TokenType t : v.types) put<uint8_t>(out, static_cast<uint8_t>(t));
  for (float s : v.scores) put<float>(out, s);
  put<uint32_t>(out, static_cast<uint32_t>(v.merges.size()));
  for (const auto& ids : impl_->merge_ids)
    for (int32_t id : ids) put<int32_t>(out, id);
  return out;
}

std::shared_ptr<const Tokenizer> Tokenizer::deserialize(const uint8_t* data, size_t size) {
  ByteReader r(data, size, kSource);
  if (std::memcmp(r.bytes(4, "magic"), kMagic, 4) != 0) fail(kSource, ": bad magic (not a Pocket tokenizer)");
  if (uint32_t ver = r.u32("version"); ver != kVersion) fail(kSource, ": unsupported version ", ver);
  Vocab v;
  v.kind = static_cast<TokenizerKind>(r.u8("kind"));
  v.pre = static_cast<PreTokenizer>(r.u8("pre-tokenizer"));
  const uint8_t flags = r.u8("flags");
  if (flags & ~0x0F) fail(kSource, ": unknown flags 0x", std::hex, int(flags));
  v.nfc = flags & 1;
  v.add_space_prefix = flags & 2;
  v.add_bos = flags & 4;
  v.ignore_merges = flags & 8;
  const uint8_t has_scores = r.u8("has_scores");
  if (has_scores > 1) fail(kSource, ": has_scores is ", int(has_scores));
  v.bos_id = r.i32("bos_id");
  v.eos_id = r.i32("eos_id");
  v.pad_id = r.i32("pad_id");
  v.unk_id = r.i32("unk_id");
  const uint32_t n = r.u32("token count");
  const uint32_t n_eos = r.u32("eos count");
  const uint8_t* eos = array(r, n_eos, 4, "eos ids");
  v.eos_ids.resize(n_eos);
  if (n_eos) std::memcpy(v.eos_ids.data(), eos, n_eos * 4ull);  // data() may be null when empty

  const uint64_t pool_size = r.u64("piece pool size");
  const char* pool = reinterpret_cast<const char*>(r.bytes(pool_size, "piece pool"));
  const uint8_t* ends = array(r, n, 4, "piece ends");
  const uint8_t* types = array(r, n, 1, "token types");
  const uint8_t* scores = has_scores ? array(r, n, 4, "scores") : nullptr;
  v.tokens.reserve(n);
  uint64_t begin = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t end;
    std::memcpy(&end, ends + 4ull * i, 4);
    if (end < begin || end > pool_size) fail(kSource, ": piece ", i, " ends at ", end, ", outside the pool");
    v.tokens.emplace_back(pool + begin, end - begin);
    begin = end;
  }
  v.types.resize(n);
  if (n) std::memcpy(v.types.data(), types, n);  // values are validated by create()
  if (scores && n) {
    v.scores.resize(n);
    std::memcpy(v.scores.data(), scores, n * 4ull);
  }
  const uint32_t n_merges = r.u32("merge count");
  const uint8_t* merges = array(r, n_merges, 12, "merges");
  std::vector<std::array<int32_t, 3>>& merge_ids = v.merge_ids;
  merge_ids.resize(n_merges);
  v.merges.reserve(n_merges);
  for (uint32_t i = 0; i < n_merges; ++i) {
    std::memcpy(merge_ids[i].data(), merges + 12ull * i, 12);
    for (int32_t id : merge_ids[i])  // needed here to read the pieces; create() checks the rest
      if (id < 0 || static_cast<uint32_t>(id) >= n) fail(kSource, ": merge ", i, " refers to token ", id);
    v.merges.emplace_back(v.tokens[merge_ids[i][0]], v.tokens[merge_ids[i][1]]);
  }
  if (r.remaining() != 0) fail(kSource, ": ", r.remaining(), " unexpected bytes after the merges");
  try {
    return create(std::move(v));
  } catch (const Error& e) {
    fail(kSource, ": ", e.what());
  }
}

}  // namespace pocket
