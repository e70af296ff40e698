#include "eval/gguf_baseline.h"

#include <algorithm>
#include <memory>

#include "convert/pocket_file.h"
#include "formats/gguf_writer.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace pocket::eval {

namespace {

bool fits_blocks(DType t, int64_t cols) {
  const int block = dtype_block_elems(t);
  return cols % block == 0;
}

}  // namespace

void write_gguf_baseline(const std::string& in, const std::string& out, const GgufBaselineOptions& opt) {
  if (opt.type != DType::Q4_0 && opt.type != DType::Q8_0)
    fail("GGUF baseline: type ", dtype_name(opt.type), " is not Q4_0 or Q8_0");
  if (opt.fallback != DType::F32 && opt.fallback != DType::F16 && opt.fallback != DType::Q8_0)
    fail("GGUF baseline: fallback type ", dtype_name(opt.fallback), " is not F32, F16 or Q8_0");
  OpenOptions oo;
  oo.tokenizer_path = opt.tokenizer_path;
  auto f = std::make_shared<const ModelFile>(open_model(in, oo));
  const ModelConfig& c = f->config;
  // GGUF `llama` stores q/k for adjacent-pair RoPE; a halves-rotating Llama
  // would need its rows permuted (convert::quantize_model does that).
  if (c.arch == Arch::Llama && c.rope_style == RopeStyle::Halves)
    fail(in, ": GGUF baseline of a Llama model with halves RoPE is not supported (use a llama2.c or GGUF source)");

  GgufWriter w(32);
  add_config_metadata(w, c);
  add_vocab_metadata(w, f->vocab, f->chat_template);
  for (const auto& [name, t] : f->tensors) {
    if (t.shape.empty() || t.shape.size() > 2)
      fail(in, ": tensor '", name, "' has ", t.shape.size(), " dimensions; only 1-D and 2-D tensors are supported");
    const int64_t cols = t.cols();
    DType type = DType::F32;
    if (!convert::keep_f32(name, t.shape)) {
      type = fits_blocks(opt.type, cols) ? opt.type : opt.fallback;
      if (!fits_blocks(type, cols)) type = DType::F32;
    }
    auto src = std::make_shared<TensorView>(t);
    if (src->shape.size() == 1) src->shape = {1, cols};
    convert::RowSource source = [f, src, cols](int64_t row0, int64_t n, float* dst) {
      for (int64_t r = 0; r < n; ++r) kernels::dequant_row(*src, row0 + r, dst + r * cols);
    };
    convert::add_streamed_tensor(w, name, type, t.shape, 0, std::move(source));
  }
  w.write(out);
}

WeightStats weight_stats(const ModelFile& f) {
  WeightStats s;
  for (const auto& [name, t] : f.tensors) {
    s.elements += t.numel();
    s.bytes += t.nbytes;
    auto it = std::find_if(s.by_type.begin(), s.by_type.end(), [type = t.type](const auto& p) { return p.type == type; });
    if (it == s.by_type.end()) it = s.by_type.insert(s.by_type.end(), {t.type, 0, 0});
    it->elements += t.numel();
    ++it->tensors;
  }
  std::sort(s.by_type.begin(), s.by_type.end(), [](const auto& a, const auto& b) { return a.type < b.type; });
  return s;
}

}  // namespace pocket::eval
