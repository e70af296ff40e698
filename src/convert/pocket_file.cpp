#include "convert/pocket_file.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <ostream>

#include "core/pq_format.h"
#include "quant/quantize.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket::convert {

DType parse_weight_type(const std::string& s, const std::string& option, bool allow_f32) {
  if (s == "q4") return DType::PQ4;
  if (s == "q5") return DType::PQ5;
  if (s == "q8") return DType::PQ8;
  if (s == "f16") return DType::F16;
  if (s == "f32" && allow_f32) return DType::F32;
  fail(option, ": '", s, "' is not a supported type (", allow_f32 ? "q4, q5, q8, f16 or f32" : "q4, q5, q8 or f16", ")");
}

int parse_group(int group, const std::string& option) {
  if (!pq::valid_group(group)) fail(option, ": group size ", group, " is not supported (32, 64 or 128)");
  return group;
}

GgufWriter pocket_writer(const ModelConfig& c, const Vocab& vocab, const std::string& chat_template, int group) {
  GgufWriter w(64);
  w.set_u32("pocket.version", kPocketFileVersion);
  w.set_u32("pocket.quant.group_size", static_cast<uint32_t>(group));
  add_config_metadata(w, c);
  std::vector<uint8_t> blob = Tokenizer::create(vocab)->serialize();
  w.set("pocket.tokenizer", GgufMeta::bytes(blob.data(), blob.size()));
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  return w;
}

Progress terminal_progress() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](size_t done, size_t total, uint64_t bytes) {
    std::fprintf(stderr, "\r  tensor %zu/%zu, %.1f MB written", done, total, static_cast<double>(bytes) / 1e6);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

bool keep_f32(const std::string& name, const std::vector<int64_t>& shape) {
  return shape.size() < 2 || name.find("norm") != std::string::npos || name.find(".bias") != std::string::npos;
}

void add_streamed_tensor(GgufWriter& w, const std::string& name, DType type, std::vector<int64_t> shape, int group,
                         RowSource source, std::function<void(uint64_t)> on_done) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = shape.size() >= 2 ? shape[0] : 1;
  const bool pq = is_pq(type);
  const int tensor_group = pq ? group : 0;
  // ~4 MB of f32 per chunk; PQ chunks must cover whole 16-row tiles so that
  // each chunk's bytes are exactly that stretch of the tensor.
  int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(cols, 1));
  if (pq) chunk = std::max<int64_t>(pq::kTileRows, chunk / pq::kTileRows * pq::kTileRows);
  auto produce = [=, source = std::move(source), on_done = std::move(on_done)](std::ostream& out) {
    std::vector<float> buf;
    uint64_t written = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      buf.resize(static_cast<size_t>(n * cols));
      source(r0, n, buf.data());
      std::vector<uint8_t> bytes;
      try {
        bytes = quantize(buf.data(), n, cols, type, group);
      } catch (const Error& e) {
        fail("tensor '", name, "' rows ", r0, "..", r0 + n - 1, ": ", e.what());
      }
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      written += bytes.size();
    }
    if (on_done) on_done(written);
  };
  w.add_tensor(name, type, std::move(shape), GgufWriter::Producer(produce), tensor_group);
}

}  // namespace pocket::convert
