#include "memory_flags.h"

#include <cstdio>

#include "bench/system.h"
#include "util/error.h"

namespace pocket::cli {

void MemoryFlags::add_to(CLI::App& app) {
  app.add_option("--mem-budget", budget_mb,
                 "Memory budget in MiB: the model and the session must fit (else an error giving the numbers); "
                 "without -c, the largest context that fits is chosen")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", batch, "Prompt tokens per forward pass (chunked prefill, 1-128; default 128)")
      ->check(CLI::Range(1, Model::kMaxBatch));
}

LoadedModel load_planned(const ModelOptions& model, int budget_mb, int batch, int sessions, std::string* path_out) {
  MemoryRequest r;
  r.budget_mb = budget_mb;
  r.context = model.context;
  r.batch = batch;
  r.threads = model.resolve_threads();
  r.kv = model.kv_type();
  r.choose_kv = !model.kv_given();
  r.sessions = sessions;
  LoadedModel m = model.load(path_out, &r);
  std::fprintf(stderr, "pocket: memory plan: %s\n", m.plan->describe().c_str());
  if (m.plan->context_chosen)
    std::fprintf(stderr, "pocket: note: context %d tokens chosen to fit the memory budget\n", m.plan->context);
  if (m.plan->kv_chosen && m.plan->kv_type != KVType::F16)
    std::fprintf(stderr, "pocket: note: %s KV cache chosen to fit the memory budget (--kv f16 to keep full precision)\n",
                 kv_type_name(m.plan->kv_type));
  return m;
}

LoadedModel MemoryFlags::load(const ModelOptions& model) const {
  if (!given()) return model.load();
  baseline_mb_ = bench::rss_mb("VmRSS");
  bench::reset_peak_rss();
  return load_planned(model, budget_mb, batch);
}

std::unique_ptr<Session> MemoryFlags::session(const LoadedModel& m, const ModelOptions& model) const {
  const int context = m.plan ? m.plan->context : model.resolve_context(m.model->config());
  const KVType kv = m.plan ? m.plan->kv_type : model.kv_type();
  return std::make_unique<Session>(m.model, m.tokenizer, context, model.resolve_threads(), batch, kv);
}

void MemoryFlags::check_prompt(size_t tokens, const LoadedModel& m) const {
  if (m.plan && tokens > static_cast<size_t>(m.plan->context))
    fail_as(ErrorCode::ContextFull, "the prompt has ", tokens, " tokens but the context the memory budget of ", budget_mb,
            " MiB allows holds ", m.plan->context, " (raise --mem-budget or shorten the prompt)");
}

void MemoryFlags::report() const {
  if (!given()) return;
  const double peak = bench::rss_mb("VmHWM");
  std::fprintf(stderr, "[memory: peak +%.1f MiB over the pre-load baseline of %.1f MiB; budget %d MiB]\n",
               peak - baseline_mb_, baseline_mb_, budget_mb);
}

}  // namespace pocket::cli
