#include "convert/quantize_model.h"

#include <algorithm>
#include <memory>
#include <ostream>

#include "core/pq_format.h"

#include "kernels/kernels.h"
#include "quant/source_grid.h"
#include "util/error.h"

namespace pocket::convert {

namespace {

bool is_qk(const std::string& name) {
  return name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight") || name.ends_with("attn_q.bias") ||
         name.ends_with("attn_k.bias");
}

// Source row of output row `r` when a halves-rotating head is stored in
// adjacent-pair order: output (2j + h) of a head is input (h * hd/2 + j).
int64_t adjacent_order_source(int64_t r, int head_dim) {
  const int64_t head = r / head_dim, i = r % head_dim;
  return head * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

// `t` re-laid out block for block (quant/source_grid.h), a few MB at a time
// while the file is written.
void add_repacked_tensor(GgufWriter& w, std::shared_ptr<const ModelFile> f, const TensorView& t,
                         std::function<void(uint64_t)> on_done) {
  const int64_t rows = t.rows();
  const int64_t chunk = std::max<int64_t>(pq::kTileRows, (int64_t{1} << 20) / t.cols() / pq::kTileRows * pq::kTileRows);
  auto produce = [f, t, rows, chunk, on_done = std::move(on_done)](std::ostream& out) {
    uint64_t written = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const std::vector<uint8_t> bytes = quant::repack_rows_to_pq(t, r0, std::min(chunk, rows - r0));
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      written += bytes.size();
    }
    if (on_done) on_done(written);
  };
  w.add_tensor(t.name, quant::source_grid_type(t.type), t.shape, GgufWriter::Producer(produce), 32);
}

}  // namespace

DType target_type(const ModelFile& f, const TensorView& t, const QuantizeOptions& opt) {
  if (keep_f32(t.name, t.shape)) return DType::F32;
  for (const std::string& part : opt.keep_f32)
    if (!part.empty() && t.name.find(part) != std::string::npos) return DType::F32;
  const bool embedding = t.name == "token_embd.weight", head = t.name == "output.weight";
  const bool overridden = (embedding && opt.embed_given) || (head && (opt.head_given || opt.embed_given));
  if (opt.source_grid && !overridden) return quant::source_grid_type(t.type);
  if (embedding) return opt.embed;
  if (head) return opt.head_given ? opt.head : opt.embed;
  (void)f;
  return opt.weights;
}

void quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opt,
                    const Progress& progress) {
  parse_group(opt.group, "--group");
  OpenOptions oo;
  oo.tokenizer_path = opt.tokenizer_path;
  auto f = std::make_shared<const ModelFile>(open_model(in, oo));
  const ModelConfig& c = f->config;
  if (opt.head_given && c.tied_embeddings && opt.head != opt.embed)
    fail(in, ": the output head is tied to the token embedding; set its type with --embed, not --head");
  if (c.arch != Arch::Llama && c.rope_style != RopeStyle::Halves)
    fail(in, ": ", arch_name(c.arch), " model with adjacent-pair RoPE cannot be stored as a Pocket file");
  const bool permute_qk = c.arch == Arch::Llama && c.rope_style == RopeStyle::Halves;
  if (opt.source_grid && opt.plain_gguf) fail("--weights source writes PQ4/PQ5/PQ8, which --format gguf cannot hold");
  if (opt.source_grid && opt.group != 32)
    fail("--weights source: the group size must be 32 (one PQ group per source block), not ", opt.group);

  if (opt.plain_gguf)
    for (const auto& [name, t] : f->tensors) {
      const DType type = target_type(*f, t, opt);
      if (type != DType::F16 && type != DType::F32)
        fail("--format gguf: tensor '", name, "' would be ", dtype_name(type),
             ", which only Pocket reads; use f16 or f32 (--weights, --embed, --head)");
    }
  GgufWriter w = opt.plain_gguf ? GgufWriter(32) : pocket_writer(c, f->vocab, f->chat_template, opt.group);
  if (opt.plain_gguf) {
    add_config_metadata(w, c);
    add_vocab_metadata(w, f->vocab, f->chat_template);
  }
  auto written = std::make_shared<uint64_t>(0);
  const size_t total = f->tensors.size();
  size_t index = 0;
  for (const auto& [name, t] : f->tensors) {
    if (t.shape.empty() || t.shape.size() > 2)
      fail(in, ": tensor '", name, "' has ", t.shape.size(), " dimensions; only 1-D and 2-D tensors are supported");
    const DType type = target_type(*f, t, opt);
    const int64_t cols = t.cols();
    const bool permute = permute_qk && is_qk(name);
    const int hd = c.head_dim;
    // dequant_row reads 2-D views; a 1-D tensor is one row. The data stays
    // mapped through `f`, which the producer keeps alive.
    auto src = std::make_shared<TensorView>(t);
    if (src->shape.size() == 1) src->shape = {1, cols};
    RowSource source = [f, src, cols, permute, hd, one_d = t.shape.size() == 1](int64_t row0, int64_t n, float* dst) {
      if (one_d && permute) {  // a q/k bias: permute elements
        std::vector<float> all(static_cast<size_t>(cols));
        kernels::dequant_row(*src, 0, all.data());
        for (int64_t i = 0; i < cols; ++i) dst[i] = all[static_cast<size_t>(adjacent_order_source(i, hd))];
        return;
      }
      for (int64_t r = 0; r < n; ++r) {
        const int64_t from = permute ? adjacent_order_source(row0 + r, hd) : row0 + r;
        kernels::dequant_row(*src, from, dst + r * cols);
      }
    };
    ++index;
    auto on_done = [written, index, total, progress](uint64_t nbytes) {
      *written += nbytes;
      if (progress) progress(index, total, *written);
    };
    // A source block that is a PQ group of 32 already: keep its codes.
    if (opt.group == 32 && type == quant::source_grid_type(t.type) && !permute && quant::can_repack_to_pq(t)) {
      add_repacked_tensor(w, f, t, std::move(on_done));
      continue;
    }
    add_streamed_tensor(w, name, type, t.shape, opt.group, std::move(source), std::move(on_done));
  }
  w.write(out);
}

}  // namespace pocket::convert
