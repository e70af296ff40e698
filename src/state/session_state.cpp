#include "state/session_state.h"

#include <algorithm>
#include <cstring>

#include "model/model.h"
#include "util/atomic_file.h"
#include "util/byte_reader.h"
#include "util/checked.h"
#include "util/error.h"
#include "formats/content_hash.h"
#include "util/hash64.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {

constexpr char kMagic[8] = {'P', 'O', 'C', 'K', 'E', 'T', 'S', 'S'};
// Version 2: the model fingerprint and the checksum come from Pocket's one
// hasher (formats/content_hash.h, util/hash64.h); version 1 files used an
// earlier hash and are refused by name.
constexpr uint32_t kVersion = 2;

struct Header {
  uint32_t kv_type, n_layers, n_kv_heads, head_dim, window, vocab, n_ctx, size, local_base, n_cached, n_conv;
};

// First position a layer's rows start at in the file.
int local_base_of(const KVCache& cache) {
  for (int l = 0; l < cache.n_layers(); ++l)
    if (cache.is_local(l)) return cache.first_stored(l);
  return 0;
}

uint64_t rows_bytes(const Header& h, const KVCache& cache) {
  uint64_t rows = 0;
  for (int l = 0; l < cache.n_layers(); ++l) {
    const uint64_t n = cache.is_local(l) ? h.size - h.local_base : h.size;
    rows = checked_add(rows, checked_mul(n, uint64_t{2} * h.n_kv_heads, "state rows"), "state rows");
  }
  // Each row: head_dim elements, and its scale when the cache has them.
  const uint64_t row = cache.row_bytes() + (cache.type() == KVType::F16 ? 0 : sizeof(float));
  return checked_mul(rows, row, "state rows");
}

}  // namespace

uint64_t model_fingerprint(const ModelFile& file) { return model_hash(file, file.vocab, HashDepth::Sampled); }

void write_session_state(std::ostream& out, const Model& model, const KVCache& cache, const SessionState& state) {
  if (state.cached.size() != static_cast<size_t>(cache.size()))
    fail("saving session state: ", state.cached.size(), " cached tokens but the KV cache holds ", cache.size());
  const ModelConfig& cfg = model.config();
  Header hd{static_cast<uint32_t>(cache.type()), static_cast<uint32_t>(cache.n_layers()),
            static_cast<uint32_t>(cache.n_kv_heads()), static_cast<uint32_t>(cache.head_dim()),
            static_cast<uint32_t>(std::max(cfg.sliding_window, 0)), static_cast<uint32_t>(cfg.vocab_size),
            static_cast<uint32_t>(cache.capacity()), static_cast<uint32_t>(cache.size()),
            static_cast<uint32_t>(local_base_of(cache)), static_cast<uint32_t>(state.cached.size()),
            static_cast<uint32_t>(state.conversation.size())};
  const uint64_t fingerprint = model_fingerprint(model.file());
  {
    Hash64 sum;
    auto put = [&](const void* p, size_t n) {
      sum.update(p, n);
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    put(kMagic, sizeof kMagic);
    put(&kVersion, 4);
    put(&hd.kv_type, 4);
    put(&fingerprint, 8);
    for (uint32_t v : {hd.n_layers, hd.n_kv_heads, hd.head_dim, hd.window, hd.vocab, hd.n_ctx, hd.size, hd.local_base,
                       hd.n_cached, hd.n_conv})
      put(&v, 4);
    put(state.cached.data(), state.cached.size() * sizeof(int32_t));
    put(state.conversation.data(), state.conversation.size() * sizeof(int32_t));
    const bool scaled = cache.type() != KVType::F16;
    for (int l = 0; l < cache.n_layers(); ++l) {
      const int first = cache.first_stored(l);
      const size_t rows = static_cast<size_t>(cache.size() - first);
      if (rows == 0) continue;
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < cache.n_kv_heads(); ++h) put(cache.row(l, kv, h, first), rows * cache.row_bytes());
      if (scaled)
        for (int kv = 0; kv < 2; ++kv)
          for (int h = 0; h < cache.n_kv_heads(); ++h) put(cache.row_scale(l, kv, h, first), rows * sizeof(float));
    }
    const uint64_t digest = sum.digest();
    out.write(reinterpret_cast<const char*>(&digest), 8);
  }
}

void save_session_state(const std::string& path, const Model& model, const KVCache& cache, const SessionState& state) {
  write_file_atomically(path, [&](std::ostream& out) { write_session_state(out, model, cache, state); });
}

SessionState read_session_state(const uint8_t* data, size_t size, const std::string& source, const Model& model,
                                KVCache& cache) {
  ByteReader r(data, size, source);
  if (size < sizeof kMagic || std::memcmp(data, kMagic, sizeof kMagic) != 0)
    fail(source, ": not a Pocket session state file (no POCKETSS magic)");
  r.skip(sizeof kMagic, "magic");
  const uint32_t version = r.u32("version");
  if (version == 1)
    fail(source, ": session state version 1 was saved by an earlier Pocket whose model fingerprint and checksum are "
                 "computed differently; this Pocket reads version ", kVersion, " (save the session again)");
  if (version != kVersion) fail(source, ": session state version ", version, " (this Pocket reads version ", kVersion, ")");
  Header h{};
  h.kv_type = r.u32("KV type");
  const uint64_t fingerprint = r.u64("model fingerprint");
  for (uint32_t* f : {&h.n_layers, &h.n_kv_heads, &h.head_dim, &h.window, &h.vocab, &h.n_ctx, &h.size, &h.local_base,
                      &h.n_cached, &h.n_conv})
    *f = r.u32("header");

  if (h.kv_type < 1 || h.kv_type > 3) fail(source, ": unknown KV cache type ", h.kv_type);
  if (h.kv_type != static_cast<uint32_t>(cache.type()))
    fail(source, ": the state holds a ", kv_type_name(static_cast<KVType>(h.kv_type)), " KV cache; this session's is ",
         kv_type_name(cache.type()), " (load it with --kv ", kv_type_name(static_cast<KVType>(h.kv_type)), ")");
  const ModelConfig& cfg = model.config();
  const uint64_t ours = model_fingerprint(model.file());
  if (fingerprint != ours || h.n_layers != static_cast<uint32_t>(cache.n_layers()) ||
      h.n_kv_heads != static_cast<uint32_t>(cache.n_kv_heads()) || h.head_dim != static_cast<uint32_t>(cache.head_dim()) ||
      h.window != static_cast<uint32_t>(std::max(cfg.sliding_window, 0)) || h.vocab != static_cast<uint32_t>(cfg.vocab_size))
    fail(source, ": the state was saved with another model (", h.n_layers, " layers, ", h.n_kv_heads, " KV heads of ",
         h.head_dim, ", vocabulary ", h.vocab, ", fingerprint ", fingerprint, "); this one has ", cache.n_layers(),
         " layers, ", cache.n_kv_heads(), " KV heads of ", cache.head_dim(), ", vocabulary ", cfg.vocab_size,
         ", fingerprint ", ours);
  if (h.size > static_cast<uint32_t>(cache.capacity()))
    fail_as(ErrorCode::ContextFull, source, ": the state holds ", h.size, " tokens but this session's context is ",
            cache.capacity(), " (use a context of at least ", h.size, "; it was saved with ", h.n_ctx, ")");
  if (h.n_cached != h.size)
    fail(source, ": ", h.n_cached, " cached tokens for a KV cache of ", h.size, " positions");
  if (h.local_base > h.size) fail(source, ": local layers start at position ", h.local_base, " past the size ", h.size);

  // Every size against the file before reading any of it.
  uint64_t expect = r.offset();
  expect = checked_add(expect, checked_mul(uint64_t{h.n_cached} + h.n_conv, 4, "state tokens"), "state size");
  expect = checked_add(expect, rows_bytes(h, cache), "state size");
  expect = checked_add(expect, 8, "state size");
  if (expect > size) fail(source, ": truncated (", size, " bytes; its header needs ", expect, ")");
  if (expect < size) fail(source, ": ", size - expect, " unexpected bytes after the state (", expect, " expected)");
  Hash64 sum;
  sum.update(data, size - 8);
  uint64_t stored;
  std::memcpy(&stored, data + size - 8, 8);
  if (stored != sum.digest()) fail(source, ": checksum mismatch (the file is damaged or was altered)");

  SessionState s;
  auto read_tokens = [&](std::vector<int32_t>& out, uint32_t n, const char* what) {
    out.resize(n);
    const uint8_t* p = r.bytes(uint64_t{n} * 4, what);
    if (n > 0) std::memcpy(out.data(), p, uint64_t{n} * 4);  // an empty vector's data() may be null
    for (int32_t t : out)
      if (t < 0 || t >= cfg.vocab_size) fail(source, ": ", what, " holds token id ", t, " outside the vocabulary of ", cfg.vocab_size);
  };
  read_tokens(s.cached, h.n_cached, "cached tokens");
  read_tokens(s.conversation, h.n_conv, "conversation tokens");

  // A smaller cache keeps fewer rows of local layers: the oldest are dropped.
  const int size_i = static_cast<int>(h.size);
  const int base = std::max(static_cast<int>(h.local_base), size_i - cache.local_slots());
  cache.restore(size_i, base);  // throws before changing anything when it does not fit
  const bool scaled = cache.type() != KVType::F16;
  for (int l = 0; l < cache.n_layers(); ++l) {
    const bool local = cache.is_local(l);
    const int from = local ? static_cast<int>(h.local_base) : 0;
    const int keep_from = local ? base : 0;
    if (size_i == from) continue;  // the writer skipped the layer
    // Rows of [from, size) in the file; those before keep_from are dropped.
    auto read_rows = [&](void* dst, size_t each, const char* what) {
      r.skip(static_cast<uint64_t>(keep_from - from) * each, what);
      const size_t n = static_cast<size_t>(size_i - keep_from) * each;
      if (n > 0) std::memcpy(dst, r.bytes(n, what), n);
    };
    for (int kv = 0; kv < 2; ++kv)
      for (int hh = 0; hh < cache.n_kv_heads(); ++hh) read_rows(cache.row(l, kv, hh, keep_from), cache.row_bytes(), "KV rows");
    if (scaled)
      for (int kv = 0; kv < 2; ++kv)
        for (int hh = 0; hh < cache.n_kv_heads(); ++hh)
          read_rows(cache.row_scale(l, kv, hh, keep_from), sizeof(float), "KV scales");
  }
  return s;
}

SessionState load_session_state(const std::string& path, const Model& model, KVCache& cache) {
  auto file = MappedFile::open(path);
  return read_session_state(file->data(), file->size(), path, model, cache);
}

}  // namespace pocket
