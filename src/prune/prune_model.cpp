#include "prune/prune_model.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/pq_format.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/hf_folder.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::prune {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// An integer of the same GGUF type as `like`.
GgufMeta same_int_type(const GgufValue& like, int64_t value) {
  GgufValue v = like;
  v.u = static_cast<uint64_t>(value);
  v.i = value;
  return to_meta(v);
}

int32_t remap_id(const PrunedVocab& p, int64_t old, const std::string& what) {
  if (old < 0) return static_cast<int32_t>(old);  // "none"
  if (static_cast<uint64_t>(old) >= p.old_to_new.size())
    fail(what, ": token id ", old, " is outside the vocabulary (", p.old_to_new.size(), " tokens)");
  const int32_t n = p.old_to_new[static_cast<size_t>(old)];
  if (n < 0) fail(what, ": token ", old, " was pruned");
  return n;
}

uint64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& o) { o.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

constexpr const char* kJsonIdKeys[] = {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"};

bool is_gguf_id_key(const std::string& key, const GgufValue& v) {
  return key.rfind("tokenizer.ggml.", 0) == 0 && key.size() > 9 && key.compare(key.size() - 9, 9, "_token_id") == 0 &&
         v.type != GgufType::Array && v.type != GgufType::String;
}

int64_t gguf_int(const GgufValue& v) {
  const bool is_signed =
      v.type == GgufType::I8 || v.type == GgufType::I16 || v.type == GgufType::I32 || v.type == GgufType::I64;
  return is_signed ? v.i : static_cast<int64_t>(v.u);
}

ojson read_json(const std::string& path) {
  ojson j;
  try {
    j = ojson::parse(read_text_file(path));
  } catch (const ojson::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
  if (!j.is_object()) fail(path, ": top level is not an object");
  return j;
}

// config.json / generation_config.json: vocab_size and token ids.
std::string rewrite_model_json(const std::string& path, const PrunedVocab& p, bool set_vocab_size) {
  ojson j = read_json(path);
  if (set_vocab_size) j["vocab_size"] = p.new_to_old.size();
  for (const char* key : kJsonIdKeys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    const std::string what = path + ": " + key;
    if (it->is_number_integer()) {
      *it = remap_id(p, it->get<int64_t>(), what);
    } else if (it->is_array()) {
      for (auto& e : *it) {
        if (!e.is_number_integer()) fail(what, ": not an integer");
        e = remap_id(p, e.get<int64_t>(), what);
      }
    } else {
      fail(what, ": neither an integer nor a list of integers");
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace

bool is_vocab_tensor(const std::string& name) {
  const std::string canonical = canonical_hf_name(name);
  const std::string& n = canonical.empty() ? name : canonical;
  return n == "token_embd.weight" || n == "output.weight";
}

std::vector<uint8_t> select_rows(const TensorView& t, const std::vector<int32_t>& new_to_old, const std::string& what) {
  if (t.shape.size() != 2) fail(what, ": a token-indexed tensor must have 2 dimensions");
  const int64_t rows = t.rows(), cols = t.cols(), n = static_cast<int64_t>(new_to_old.size());
  for (int32_t o : new_to_old)
    if (o < 0 || o >= rows) fail(what, ": has ", rows, " rows, the vocabulary needs row ", o);
  const auto* src = static_cast<const uint8_t*>(t.data);
  std::vector<uint8_t> out;
  if (is_pq(t.type)) {
    // Tiles of 16 rows; inside each group block a row owns its scale (and
    // PQ4/PQ5 offset) and 4 bytes of every 64-byte chunk (and PQ5 plane).
    const int g = t.group;
    if (!pq::valid_group(g)) fail(what, ": bad PQ group size ", g);
    const int64_t tile = pq::tile_bytes(t.type, cols, g), block = pq::group_block_bytes(t.type, g);
    const int64_t header = pq::header_bytes(t.type), groups = pq::groups_per_row(cols, g);
    const int64_t chunks = (block - header) / 64;
    if (static_cast<int64_t>(t.nbytes) != pq::padded_rows(rows) / pq::kTileRows * tile)
      fail(what, ": size does not match its PQ shape");
    out.assign(static_cast<size_t>(pq::padded_rows(n) / pq::kTileRows * tile), 0);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t o = new_to_old[static_cast<size_t>(r)];
      const int64_t sr = o % pq::kTileRows, dr = r % pq::kTileRows;
      for (int64_t k = 0; k < groups; ++k) {
        const uint8_t* s = src + o / pq::kTileRows * tile + k * block;
        uint8_t* d = out.data() + r / pq::kTileRows * tile + k * block;
        std::memcpy(d + 2 * dr, s + 2 * sr, 2);  // fp16 scale
        if (t.type != DType::PQ8) std::memcpy(d + 32 + 2 * dr, s + 32 + 2 * sr, 2);  // fp16 offset
        for (int64_t c = 0; c < chunks; ++c) std::memcpy(d + header + 64 * c + 4 * dr, s + header + 64 * c + 4 * sr, 4);
      }
    }
    return out;
  }
  if (rows == 0 || t.nbytes % static_cast<uint64_t>(rows) != 0) fail(what, ": rows are not of equal size");
  const size_t row = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(rows));
  out.resize(row * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(out.data() + static_cast<size_t>(r) * row, src + static_cast<size_t>(new_to_old[static_cast<size_t>(r)]) * row,
                row);
  return out;
}

void write_pruned_gguf(const std::string& in, const std::string& out, const PrunedVocab& p) {
  const GgufFile g = GgufFile::parse(MappedFile::open(in));
  GgufWriter w(g.alignment());
  std::vector<int32_t> kept_merges;
  for (size_t r = 0; r < p.merge_kept.size(); ++r)
    if (p.merge_kept[r]) kept_merges.push_back(static_cast<int32_t>(r));
  const std::string arch = std::string(g.get_string("general.architecture").value_or(""));
  const size_t n_old = p.old_to_new.size();
  for (const auto& [key, v] : g.metadata()) {
    const std::string what = in + ": " + key;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type") {
      if (v.type != GgufType::Array || v.count != n_old)
        fail(what, ": not an array of ", n_old, " entries (one per token)");
      w.set(key, to_meta(v, &p.new_to_old));
    } else if (key == "tokenizer.ggml.merges") {
      if (v.type != GgufType::Array || v.count != p.merge_kept.size())
        fail(what, ": not an array of ", p.merge_kept.size(), " merges");
      w.set(key, to_meta(v, &kept_merges));
    } else if (is_gguf_id_key(key, v)) {
      const int64_t old = gguf_int(v);
      if (old < 0 || static_cast<uint64_t>(old) >= n_old) {  // outside: "none" 
        w.set(key, to_meta(v));
      } else {
        w.set(key, same_int_type(v, remap_id(p, old, what)));
      }
    } else if (key == arch + ".vocab_size") {
      w.set(key, same_int_type(v, static_cast<int64_t>(p.new_to_old.size())));
    } else if (key == "pocket.tokenizer") {
      const auto blob = Tokenizer::create(p.vocab)->serialize();
      w.set(key, GgufMeta::bytes(blob.data(), blob.size()));
    } else {
      w.set(key, to_meta(v));
    }
  }
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers;
  for (const GgufTensorInfo& t : g.tensors()) {
    const int group = is_pq(t.type) ? g.pq_group() : 0;
    if (!is_vocab_tensor(t.name)) {
      w.add_tensor(t.name, t.type, t.shape, g.tensor_data(t), t.nbytes, group);
      continue;
    }
    TensorView view{t.name, t.type, t.shape, g.tensor_data(t), t.nbytes, group};
    auto rows = std::make_shared<std::vector<uint8_t>>(select_rows(view, p.new_to_old, in + ": tensor " + t.name));
    buffers.push_back(rows);
    w.add_tensor(t.name, t.type, {static_cast<int64_t>(p.new_to_old.size()), t.shape[1]}, rows->data(), rows->size(),
                 group);
  }
  w.write(out);
}

std::vector<WrittenFile> write_pruned_hf_folder(const std::string& in, const std::string& out, const PrunedVocab& p) {
  std::vector<WrittenFile> files;
  fs::create_directories(out);
  auto src = [&](const std::string& name) { return (fs::path(in) / name).string(); };
  auto dst = [&](const std::string& name) { return (fs::path(out) / name).string(); };
  auto record = [&](const std::string& name) { files.push_back({name, size_of(src(name)), size_of(dst(name))}); };

  // Weight files: the index's shards, else model.safetensors.
  std::vector<std::string> shards;
  const std::string index = "model.safetensors.index.json";
  ojson index_json;
  if (file_exists(src(index))) {
    try {
      index_json = ojson::parse(read_text_file(src(index)));
    } catch (const ojson::exception& e) {
      fail(src(index), ": invalid JSON: ", e.what());
    }
    auto wm = index_json.find("weight_map");
    if (wm == index_json.end() || !wm->is_object()) fail(src(index), ": 'weight_map' is missing or not an object");
    std::set<std::string> seen;
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string()) fail(src(index), ": weight_map entry '", tensor, "' is not a file name");
      const std::string name = file.get<std::string>();
      if (name.find('/') != std::string::npos || name == "..")
        fail(src(index), ": shard name '", name, "' leaves the folder");
      if (seen.insert(name).second) shards.push_back(name);
    }
  } else {
    shards.push_back("model.safetensors");
  }
  uint64_t total = 0;
  for (const std::string& shard : shards) {
    const SafetensorsFile st = SafetensorsFile::open(src(shard));
    std::vector<TensorView> views;
    std::vector<std::vector<uint8_t>> rows;
    rows.reserve(2);
    for (const auto& [name, t] : st.tensors()) {
      TensorView v = t;
      if (is_vocab_tensor(name)) {
        rows.push_back(select_rows(t, p.new_to_old, src(shard) + ": tensor " + name));
        v.data = rows.back().data();
        v.nbytes = rows.back().size();
        v.shape[0] = static_cast<int64_t>(p.new_to_old.size());
      }
      total += v.nbytes;
      views.push_back(v);
    }
    write_safetensors(dst(shard), views, st.metadata());
    record(shard);
  }
  if (!index_json.is_null()) {
    index_json["metadata"]["total_size"] = total;
    write_text(dst(index), index_json.dump(2) + "\n");
    record(index);
  }
  write_text(dst("config.json"), rewrite_model_json(src("config.json"), p, true));
  record("config.json");
  if (file_exists(src("generation_config.json"))) {
    write_text(dst("generation_config.json"), rewrite_model_json(src("generation_config.json"), p, false));
    record("generation_config.json");
  }
  return files;
}

std::vector<int32_t> model_token_ids(const std::string& in, size_t n_vocab) {
  std::vector<int32_t> ids;
  auto add = [&](int64_t id) {
    if (id >= 0 && static_cast<uint64_t>(id) < n_vocab) ids.push_back(static_cast<int32_t>(id));
  };
  if (is_directory(in)) {
    for (const char* name : {"config.json", "generation_config.json"}) {
      const std::string path = (fs::path(in) / name).string();
      if (!file_exists(path)) continue;
      const ojson j = read_json(path);
      for (const char* key : kJsonIdKeys) {
        auto it = j.find(key);
        if (it == j.end()) continue;
        if (it->is_number_integer()) add(it->get<int64_t>());
        if (it->is_array())
          for (const auto& e : *it)
            if (e.is_number_integer()) add(e.get<int64_t>());
      }
    }
    return ids;
  }
  const GgufFile g = GgufFile::parse(MappedFile::open(in));
  for (const auto& [key, v] : g.metadata())
    if (is_gguf_id_key(key, v)) add(gguf_int(v));
  return ids;
}

}  // namespace pocket::prune
