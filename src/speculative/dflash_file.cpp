#include "speculative/dflash_file.h"
#include "speculative/dflash_gguf.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"
#include "quant/quantize.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {

// The element count a matrix row must be a multiple of to take `type`.
int row_block(DType type, int group) {
  switch (type) {
    case DType::PQ4:
    case DType::PQ8:
      return group;
    default:
      return 1;
  }
}

}  // namespace

DFlashConvertReport convert_dflash_draft(const std::string& dir, const std::string& out,
                                         const DFlashConvertOptions& opt) {
  if (opt.weights != DType::PQ8 && opt.weights != DType::PQ4 && opt.weights != DType::F16 && opt.weights != DType::F32)
    fail_as(ErrorCode::InvalidArgument, "a DFlash draft's matrices can be PQ8, PQ4, F16 or F32, not ",
            dtype_name(opt.weights));
  // The source: a folder, or a draft file (llama.cpp's GGUF form, or a
  // Pocket draft file to quantize again).
  std::string config;
  std::map<std::string, TensorView> tensors;
  std::optional<SafetensorsFile> st;
  std::optional<DFlashDraftFile> file;
  std::optional<DraftVocab> ranking;
  if (std::filesystem::is_regular_file(dir)) {
    file.emplace(open_dflash_draft_file(dir));
    config = file->config_json;
    tensors = file->tensors;
    ranking = file->draft_vocab;
  } else {
    config = read_text_file(dir + "/config.json");
    st.emplace(SafetensorsFile::open(dir + "/model.safetensors"));
    tensors = st->tensors();
    if (file_exists(dir + "/" + kDraftVocabFileName)) ranking = read_draft_vocab(dir + "/" + kDraftVocabFileName);
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config);
  } catch (const nlohmann::json::exception& e) {
    fail(dir, ": config.json is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object() || !j.contains("dflash_config")) fail(dir, ": config.json has no \"dflash_config\": not a DFlash draft");
  GgufWriter w;
  w.set_string("general.architecture", "dflash-draft");
  w.set_u32("pocket.version", kPocketFileVersion);
  const bool pq = opt.weights == DType::PQ4 || opt.weights == DType::PQ8;
  if (pq) w.set_u32("pocket.quant.group_size", static_cast<uint32_t>(opt.group));
  w.set_string(kDFlashConfigKey, config);
  DFlashConvertReport rep;
  if (ranking) {
    const DraftVocab& v = *ranking;
    std::vector<GgufMeta> ids;
    ids.reserve(v.ranked.size());
    for (int32_t id : v.ranked) ids.push_back(GgufMeta::i32(id));
    w.set(kDraftVocabKey, GgufMeta::array(ids, GgufType::I32));
    w.set_i32(kDraftVocabSizeKey, v.vocab_size);
    rep.draft_vocab = static_cast<int>(v.ranked.size());
  }
  std::vector<std::vector<uint8_t>> keep;  // bytes the writer streams from
  for (const auto& [name, t] : tensors) {
    // DFlash2's conv base kernels are 3-D (sides x taps x hidden): f32 rows.
    const int64_t cols = t.shape.empty() ? 0 : t.shape.back();
    if (t.shape.empty() || t.shape.size() > 3 || cols <= 0)
      fail(dir, ": tensor ", name, " has ", t.shape.size(),
           " dimensions; a DFlash draft has vectors, matrices and (DFlash2) 3-D conv kernels");
    const int64_t rows = t.numel() / cols;
    std::vector<float> f(static_cast<size_t>(rows * cols));
    TensorView m = t;
    m.shape = {rows, cols};
    for (int64_t r = 0; r < rows; ++r) kernels::dequant_row(m, r, f.data() + r * cols);
    const bool quantize_it = t.shape.size() == 2 && cols % row_block(opt.weights, opt.group) == 0;
    const DType type = quantize_it ? opt.weights : DType::F32;
    std::vector<uint8_t> bytes;
    if (type == DType::F32) {
      bytes.resize(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
    } else {
      bytes = quantize(f.data(), rows, cols, type, opt.group);
    }
    rep.bytes_in += t.nbytes;
    rep.bytes_out += bytes.size();
    ++rep.tensors;
    rep.quantized += quantize_it;
    keep.push_back(std::move(bytes));
    w.add_tensor(name, type, t.shape, keep.back().data(), keep.back().size(), type == opt.weights && pq ? opt.group : 0);
  }
  w.write(out);
  return rep;
}

DFlashDraftFile open_dflash_draft_file(const std::string& path) {
  DFlashDraftFile f;
  f.mapping = MappedFile::open(path);
  const GgufFile g = GgufFile::parse(f.mapping);
  const auto config = g.get_string(kDFlashConfigKey);
  if (!config && g.get_string("general.architecture") == "dflash") {
    read_llama_dflash_gguf(g, f);  // llama.cpp's dflash.* form
    return f;
  }
  if (!config)
    fail(path, ": not a Pocket DFlash draft file (no ", kDFlashConfigKey,
         "; make one with pocket convert-draft, or give the draft's folder)");
  f.config_json = std::string(*config);
  if (g.has(kDraftVocabKey) || g.has(kDraftVocabSizeKey)) {
    const std::vector<int64_t> ids = g.get_int_array(kDraftVocabKey, true);
    const int64_t size = g.get_int(kDraftVocabSizeKey).value_or(-1);
    if (size <= 0 || size > (int64_t{1} << 24)) fail(path, ": missing or bad ", kDraftVocabSizeKey, " (", size, ")");
    DraftVocab v;
    v.vocab_size = static_cast<int32_t>(size);
    for (int64_t id : ids) {
      if (id < 0 || id >= v.vocab_size)
        fail(path, ": draft vocabulary lists token ", id, ", outside the vocabulary of ", v.vocab_size, " tokens");
      v.ranked.push_back(static_cast<int32_t>(id));
    }
    check_draft_vocab(v, path);
    f.draft_vocab = std::move(v);
  }
  for (const GgufTensorInfo& t : g.tensors()) f.tensors[t.name] = g.view(t);
  return f;
}

}  // namespace pocket
