// The public Decider (include/pocket/pocket.h): decision heads over a
// SharedModel, a thin layer over heads::Scorer.
#include <algorithm>
#include <atomic>
#include <map>

#include "formats/content_hash.h"
#include "formats/gguf.h"
#include "heads/head_file.h"
#include "heads/scorer.h"
#include "pocket/pocket.h"
#include "runtime/loader.h"
#include "runtime/shared_model_impl.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace pocket {

struct Decider::Impl {
  std::shared_ptr<const SharedModel> shared;
  std::unique_ptr<heads::Scorer> scorer;
  std::string model_hash;
  std::map<std::string, heads::Head> heads;
  std::atomic<bool> busy{false};
};

namespace {

class Busy {
 public:
  Busy(std::atomic<bool>& b, const char* what) : b_(b) {
    if (b_.exchange(true)) fail_as(ErrorCode::Busy, "Decider::", what, ": another call is running on this decider");
  }
  ~Busy() { b_.store(false); }

 private:
  std::atomic<bool>& b_;
};

Classification to_public(const heads::Prediction& p, const std::vector<std::string>& labels) {
  Classification c;
  c.label = p.label;
  c.probability = p.probability;
  c.out_of_scope = p.out_of_scope;
  for (size_t i = 0; i < labels.size(); ++i) c.scores.emplace_back(labels[i], p.probs[i]);
  std::stable_sort(c.scores.begin(), c.scores.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return c;
}

}  // namespace

Decider::Decider(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decider::~Decider() = default;

std::unique_ptr<Decider> Decider::create(std::shared_ptr<const SharedModel> model, const DeciderOptions& options) {
  if (!model) fail_as(ErrorCode::InvalidArgument, "Decider::create: no model (null pointer)");
  if (options.max_tokens < 2) fail_as(ErrorCode::InvalidArgument, "Decider::create: max_tokens must be at least 2");
  auto impl = std::make_unique<Impl>();
  impl->shared = std::move(model);
  const LoadedModel& m = impl->shared->impl_->model;
  const int threads = resolve_threads(options.threads);
  impl->scorer = std::make_unique<heads::Scorer>(m.model, m.tokenizer, threads, options.max_tokens);
  ThreadPool pool(threads);
  impl->model_hash = model_content_hash(*m.file, m.tokenizer->vocab(), &pool);
  if (m.file->format == "pocket" || m.file->format == "gguf") {  // the model file's own heads
    for (heads::Head& h : heads::read_heads(GgufFile::parse(MappedFile::open(impl->shared->path())))) {
      heads::check_base(h, impl->model_hash, impl->shared->path());
      impl->heads[h.name] = std::move(h);
    }
  }
  return std::unique_ptr<Decider>(new Decider(std::move(impl)));
}

std::string Decider::add_head(const std::string& path) {
  Busy b(impl_->busy, "add_head");
  heads::Head h = heads::load_head(path);
  heads::check_base(h, impl_->model_hash, path);
  std::string name = h.name;
  impl_->heads[name] = std::move(h);
  return name;
}

std::vector<std::string> Decider::heads() const {
  std::vector<std::string> out;
  for (const auto& kv : impl_->heads) out.push_back(kv.first);
  return out;
}

static const heads::Head& find_head(const std::map<std::string, heads::Head>& hs, const std::string& name) {
  auto it = hs.find(name);
  if (it == hs.end()) fail_as(ErrorCode::InvalidArgument, "no head named '", name, "' (add it with Decider::add_head)");
  return it->second;
}

std::vector<std::string> Decider::labels(const std::string& head) const { return find_head(impl_->heads, head).labels; }

Classification Decider::classify(const std::string& head, const std::string& text) {
  Busy b(impl_->busy, "classify");
  const heads::Head& h = find_head(impl_->heads, head);
  return to_public(impl_->scorer->classify(h, text), h.labels);
}

Classification Decider::route(const std::string& head, const std::string& text, float threshold) {
  Busy b(impl_->busy, "route");
  const heads::Head& h = find_head(impl_->heads, head);
  return to_public(impl_->scorer->route(h, text, threshold), h.labels);
}

Classification Decider::classify_zero_shot(const std::string& text, const std::vector<std::string>& labels,
                                           const std::string& prompt_template) {
  Busy b(impl_->busy, "classify_zero_shot");
  return to_public(impl_->scorer->zero_shot(text, labels, prompt_template), labels);
}

std::vector<RankedCandidate> Decider::rank(const std::string& query, const std::vector<std::string>& candidates,
                                           const std::string& head) {
  Busy b(impl_->busy, "rank");
  std::vector<heads::Ranked> r = head.empty() ? impl_->scorer->rank_loglik(query, candidates)
                                              : impl_->scorer->rank_head(find_head(impl_->heads, head), query, candidates);
  std::vector<RankedCandidate> out;
  for (const auto& x : r) out.push_back({x.index, x.score});
  return out;
}

}  // namespace pocket
