// The hard memory budget (--mem-budget, EngineOptions::mem_budget_mb): what
// a model and one session on it will hold resident, planned from the file's
// headers before its weight pages are touched, and the context chosen to
// fit a budget (or a refusal that gives the numbers).
//
// What counts (all of it is resident memory, RSS, over the process's
// baseline before the model is opened):
//  - weights: every page of the file mappings (Pocket touches them all at
//    load, and touched file-backed pages are in RSS like any other), less
//    the pages of Q4_0, Q5_0, Q5_1, Q8_0 (and Q4_K) matrices repacked at load plus their
//    copies, plus the pieces being built during the load (one per repacking
//    thread);
//  - tokenizer: the vocabulary and merge tables (an estimate from their sizes);
//  - KV cache: kv_cache_bytes (model/kv_cache.h) for the context, local layers capped
//    at their window;
//  - scratch: the forward pass's rows for one prefill chunk (--batch), the
//    quantized activations, attention scores (per thread, per position),
//    logits and the sampler's buffers;
//  - overhead: a fixed allowance for the heap, thread stacks and code pages.
// Several sessions on one model (`pocket serve --parallel N`) each hold a
// KV cache and scratch; the weights, tokenizer and overhead are counted once.
//
// The KV type, when the request leaves it open (choose_kv): f16 if the
// context (fixed, or the largest wanted) fits with it, else q8 (int8 rows:
// about half the bytes, KL ~2e-3 on stories260K); q4 is never chosen by the
// plan, because its quality cost is large (KL ~0.5 on stories260K,
// docs/benchmarks.md), only when asked for.
#pragma once
#include <cstdint>
#include <string>

#include "model/kv_cache.h"
#include "core/config.h"

namespace pocket {

struct ModelFile;
struct Vocab;

struct MemoryRequest {
  int budget_mb = 0;  // MiB (2^20 bytes); 0 = no budget
  int context = 0;      // fixed context in tokens; 0 = choose the largest that fits...
  int max_context = 0;  // ...up to this (the default context: the model's, capped at 4096)
  int batch = 0;      // prompt tokens per forward pass (0 = Model::kMaxBatch)
  int threads = 1;
  KVType kv = KVType::F16;
  bool choose_kv = false;  // the caller left the KV type open: the plan chooses (above)
  int sessions = 1;        // sessions on the model, each with its own KV cache of `context` and scratch
  bool repack_kquants = true;  // GGUF Q4_K matrices become PQ4 copies at load (false: --exact-kquants)
};

struct MemoryPlan {
  uint64_t weights = 0;     // resident after the load
  uint64_t load_extra = 0;  // held only while loading (repacked pieces in flight)
  uint64_t tokenizer = 0;
  uint64_t kv = 0;
  uint64_t scratch = 0;
  uint64_t overhead = 0;
  uint64_t budget = 0;  // bytes
  int context = 0;  // per session
  int batch = 0;
  int sessions = 1;  // kv and scratch cover this many sessions
  KVType kv_type = KVType::F16;
  bool context_chosen = false;  // the plan chose the context (the request left it open)
  bool kv_chosen = false;       // the plan chose kv_type (the request left it open)
  // The most the process holds: while generating (weights, tokenizer, KV,
  // scratch, overhead) or while loading, whichever is larger.
  uint64_t peak() const;
  // "weights 1.0 MiB + tokenizer ... = 12.3 MiB of the budget of 16 MiB, context 512 tokens (chosen)"
  std::string describe() const;
};

// Bytes the parts above take for `file` (its mappings, tensors and config),
// `vocab` and a request's context, batch, threads, sessions and KV type
// (request.kv; choose_kv is ignored); no budget check.
MemoryPlan memory_for(const ModelFile& file, const Vocab& vocab, const MemoryRequest& request, int context);

// The plan for `request` under its budget: with a fixed context, that
// context if it fits; otherwise the largest context up to max_context that
// fits; with choose_kv, the KV type as described above. Throws Error
// (InvalidArgument) naming each part, the total and the budget when even
// kMinPlannedContext tokens (or the fixed context) do not fit.
MemoryPlan plan_memory(const ModelFile& file, const Vocab& vocab, const MemoryRequest& request);

// The smallest context a budget plan chooses (a plan that cannot hold this
// many tokens is refused).
inline constexpr int kMinPlannedContext = 64;

}  // namespace pocket
