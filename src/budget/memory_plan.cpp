#include "budget/memory_plan.h"

#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "formats/model_file.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "quant/source_grid.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t pages(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// Heap, thread stacks and code pages a run touches beyond the planned
// buffers: a fixed part and a part per worker thread.
constexpr uint64_t kOverheadFixed = 12 * kMiB;
constexpr uint64_t kOverheadPerThread = kMiB;

struct Weights {
  uint64_t resident = 0, load_extra = 0;
};

// The file's pages (all touched at load), less what repacking releases,
// plus the repacked copies; while loading, each repacking thread holds one
// piece (Model::repack_piece_rows() rows) beside the pages it replaces.
Weights weights_of(const ModelFile& file, bool repack_kquants) {
  Weights w;
  for (const auto& m : file.mappings) w.resident += pages(m->size());
  for (const auto& b : file.buffers) w.resident += pages(b->size());
  uint64_t largest_piece = 0;
  for (const auto& [name, t] : file.tensors) {
    if (!Model::repacks_at_load(t.type, repack_kquants) || t.shape.size() != 2) continue;
    const uint64_t copy = tensor_nbytes(quant::source_grid_type(t.type), t.shape, 32, name);
    // Only whole pages inside each piece are released.
    const int64_t piece_rows = Model::repack_piece_rows();
    const uint64_t pieces = static_cast<uint64_t>((t.shape[0] + piece_rows - 1) / piece_rows);
    const uint64_t released = t.nbytes > 2 * kPage * pieces ? (t.nbytes - 2 * kPage * pieces) / kPage * kPage : 0;
    w.resident = w.resident - std::min(w.resident, released) + pages(copy);
    largest_piece = std::max(largest_piece, copy / pieces);
  }
  w.load_extra = static_cast<uint64_t>(Model::repack_threads()) * pages(largest_piece + kPage);
  // Norm weights and biases converted to f32, RoPE tables.
  const ModelConfig& c = file.config;
  w.resident += 4ull * (static_cast<uint64_t>(c.n_layers) * (4ull * c.dim + 2ull * c.head_dim + c.q_dim() + 2ull * c.kv_dim()) +
                        c.dim + 2ull * c.head_dim);
  return w;
}

// The vocabulary as loaded, the tokenizer's own tables built from it and
// their hash indexes: a generous estimate per entry.
uint64_t tokenizer_of(const Vocab& v) {
  uint64_t bytes = 0;
  for (const std::string& t : v.tokens) bytes += 3 * (t.size() + 64);
  for (const auto& [a, b] : v.merges) bytes += 2 * (a.size() + b.size() + 96);
  bytes += v.scores.size() * sizeof(float) + v.types.size() + v.merge_ids.size() * 12;
  return bytes;
}

uint64_t scratch_of(const ModelConfig& c, int context, int batch, int threads) {
  const uint64_t B = static_cast<uint64_t>(batch);
  // Context's per-row buffers: x, xn, q, k, v, attn, gate, up (floats).
  const uint64_t row = static_cast<uint64_t>(c.dim) + std::max(c.dim, c.q_dim()) + 2ull * c.q_dim() + 2ull * c.kv_dim() +
                       2ull * c.hidden_dim;
  const uint64_t widest = static_cast<uint64_t>(std::max({c.dim, c.q_dim(), c.hidden_dim}));
  const uint64_t acts = B * (widest + 64) * 2;  // int8 activations with their block scales and sums
  const uint64_t scores = 4ull * kernels::kMaxAttentionQueries * static_cast<uint64_t>(context) * threads;
  const uint64_t vocab = 4ull * c.vocab_size * 4;  // logits, the sampler's candidates
  const uint64_t tokens = 16ull * context;         // cached ids, history
  return pages(4 * B * row) + pages(acts) + pages(scores) + pages(vocab) + pages(tokens);
}

// Tenths of a MiB, rounded up (so a budget of the figure shown always holds it).
std::string mib(uint64_t bytes) {
  const uint64_t tenths = (bytes * 10 + kMiB - 1) / kMiB;
  return cat(tenths / 10, ".", tenths % 10, " MiB");
}

}  // namespace

uint64_t MemoryPlan::peak() const {
  const uint64_t run = weights + tokenizer + kv + scratch + overhead;
  const uint64_t load = weights + load_extra + tokenizer + overhead;
  return std::max(run, load);
}

std::string MemoryPlan::describe() const {
  const std::string each = sessions > 1 ? cat(sessions, " sessions x ") : "";
  std::string s = cat("weights ", mib(weights), " + tokenizer ", mib(tokenizer), " + KV cache ", mib(kv), " (", each,
                      context, " tokens, ", kv_type_name(kv_type), kv_chosen ? ", chosen" : "", ") + scratch ", mib(scratch),
                      " (", each, "batch ", batch, ") + overhead ", mib(overhead));
  if (load_extra > 0) s += cat("; while loading + ", mib(load_extra), " of repacked weights");
  s += cat(" = peak ", mib(peak()));
  if (budget > 0) s += cat(" of the budget of ", mib(budget));
  return s;
}

MemoryPlan memory_for(const ModelFile& file, const Vocab& vocab, const MemoryRequest& r, int context) {
  const ModelConfig& c = file.config;
  const Weights w = weights_of(file, r.repack_kquants);
  MemoryPlan p;
  p.weights = w.resident;
  p.load_extra = w.load_extra;
  p.tokenizer = pages(tokenizer_of(vocab));
  p.context = context;
  p.batch = std::min(r.batch > 0 ? r.batch : Model::kMaxBatch, context);
  p.sessions = std::max(1, r.sessions);
  p.kv_type = r.kv;
  p.kv = p.sessions * pages(kv_cache_bytes(c, context, r.kv));
  p.scratch = p.sessions * scratch_of(c, context, p.batch, std::max(1, r.threads));
  p.overhead = kOverheadFixed + kOverheadPerThread * static_cast<uint64_t>(std::max(1, r.threads));
  p.budget = static_cast<uint64_t>(std::max(0, r.budget_mb)) * kMiB;
  return p;
}

namespace {

// plan_memory for one KV type (r.kv).
MemoryPlan plan_for_kv(const ModelFile& file, const Vocab& vocab, const MemoryRequest& r) {
  const auto refuse = [&](const MemoryPlan& p, const std::string& what) {
    fail_as(ErrorCode::InvalidArgument, "the memory budget of ", r.budget_mb, " MiB is too small ", what, ": ", p.describe(),
            " (raise --mem-budget to at least ", (p.peak() + kMiB - 1) / kMiB, " MiB",
            r.context > 0 ? ", lower the context" : "", r.sessions > 1 ? ", lower the number of sessions" : "",
            " or lower --batch)");
  };
  if (r.context > 0) {
    MemoryPlan p = memory_for(file, vocab, r, r.context);
    if (p.peak() > p.budget) refuse(p, cat("for a context of ", r.context, " tokens"));
    return p;
  }
  const int largest = r.max_context;
  const int smallest = std::min(kMinPlannedContext, largest);
  MemoryPlan lo = memory_for(file, vocab, r, smallest);
  if (lo.peak() > lo.budget) refuse(lo, cat("even for a context of ", smallest, " tokens"));
  // The peak grows with the context: the largest that fits, by bisection.
  int good = smallest, bad = largest + 1;
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    if (memory_for(file, vocab, r, mid).peak() <= lo.budget)
      good = mid;
    else
      bad = mid;
  }
  MemoryPlan p = memory_for(file, vocab, r, good);
  p.context_chosen = true;
  return p;
}

}  // namespace

MemoryPlan plan_memory(const ModelFile& file, const Vocab& vocab, const MemoryRequest& r) {
  if (r.budget_mb < 1) fail_as(ErrorCode::InvalidArgument, "memory budget ", r.budget_mb, " MiB must be at least 1");
  if (r.batch < 0 || r.batch > Model::kMaxBatch)
    fail_as(ErrorCode::InvalidArgument, "batch ", r.batch, " is outside [1, ", Model::kMaxBatch, "] (0 = ", Model::kMaxBatch, ")");
  if (r.context < 0 || r.context > file.config.max_seq_len || r.max_context < 1)
    fail_as(ErrorCode::InvalidArgument, "memory plan: context ", r.context, " outside [0, ", file.config.max_seq_len, "]");
  if (r.sessions < 1) fail_as(ErrorCode::InvalidArgument, "memory plan: ", r.sessions, " sessions (at least 1)");
  if (!r.choose_kv) return plan_for_kv(file, vocab, r);
  // f16 when the whole wanted context fits with it, else q8 (which may
  // still have to settle for less context, or refuse).
  MemoryRequest f16 = r;
  f16.kv = KVType::F16;
  const int wanted = r.context > 0 ? r.context : r.max_context;
  if (memory_for(file, vocab, f16, wanted).peak() <= static_cast<uint64_t>(r.budget_mb) * kMiB) {
    MemoryPlan p = plan_for_kv(file, vocab, f16);
    p.kv_chosen = true;
    return p;
  }
  MemoryRequest q8 = r;
  q8.kv = KVType::Q8;
  MemoryPlan p = plan_for_kv(file, vocab, q8);
  p.kv_chosen = true;
  return p;
}

}  // namespace pocket
