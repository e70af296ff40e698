// pocket eval: perplexity of a model on a text file and, with --ref, KL
// divergence and top-1 agreement against a reference model on the same windows.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "eval/gguf_baseline.h"
#include "eval/perplexity.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::cli {

namespace {

struct EvalArgs {
  std::string model, tokenizer, ref, ref_tokenizer, ref_map, text_file;
  std::string kv = "f16";  // the evaluated model's KV cache (the reference's is f16)
  int ctx = 256, stride = 0, threads = 0;
  int64_t max_tokens = 0;
  bool json = false;
  bool exact_kquants = false;
};

LoadedModel load(const std::string& path, const std::string& tokenizer, bool exact_kquants) {
  ModelOptions o;
  o.model = path;
  o.tokenizer = tokenizer;
  o.exact_kquants = exact_kquants;
  return o.load();
}

nlohmann::json model_facts(const LoadedModel& m, const std::string& path) {
  const eval::WeightStats s = eval::weight_stats(*m.file);
  nlohmann::json types = nlohmann::json::object();
  for (const auto& t : s.by_type) types[std::string(dtype_name(t.type))] = {{"tensors", t.tensors}, {"elements", t.elements}};
  return {{"path", path},
          {"format", m.file->format},
          {"file_bytes", m.file->file_size},
          {"weights", s.elements},
          {"weight_bytes", s.bytes},
          {"bits_per_weight", s.bits_per_weight()},
          {"types", types}};
}

void print_text(const nlohmann::json& j) {
  auto facts = [](const char* label, const nlohmann::json& m) {
    std::printf("%s %s: %.3f bits/weight over %lld weights, file %llu bytes\n", label,
                m["path"].get<std::string>().c_str(), m["bits_per_weight"].get<double>(),
                static_cast<long long>(m["weights"].get<int64_t>()),
                static_cast<unsigned long long>(m["file_bytes"].get<uint64_t>()));
  };
  facts("model", j["model"]);
  if (j.contains("reference")) facts("reference", j["reference"]);
  std::printf("text: %lld tokens, %lld windows of %d (stride %d), %lld scored positions\n",
              static_cast<long long>(j["text_tokens"].get<int64_t>()), static_cast<long long>(j["windows"].get<int64_t>()),
              j["ctx"].get<int>(), j["stride"].get<int>(), static_cast<long long>(j["scored"].get<int64_t>()));
  std::printf("perplexity: %.4f (%.4f nats per character over %lld characters)\n", j["perplexity"].get<double>(),
              j["nll_per_char"].get<double>(), static_cast<long long>(j["chars"].get<int64_t>()));
  if (j.contains("reference")) {
    std::printf("reference perplexity: %.4f\n", j["reference_perplexity"].get<double>());
    if (j.contains("reference_kept_perplexity")) {
      std::printf("reference perplexity renormalised over the kept tokens: %.4f\n",
                  j["reference_kept_perplexity"].get<double>());
      std::printf("reference probability on dropped tokens: mean %.6f, max %.6f\n",
                  j["reference_dropped_mass_mean"].get<double>(), j["reference_dropped_mass_max"].get<double>());
    }
    std::printf("KL(ref || model): mean %.6f, p99 %.6f, max %.6f nats\n", j["kl_mean"].get<double>(),
                j["kl_p99"].get<double>(), j["kl_max"].get<double>());
    std::printf("top-1 agreement: %.4f\n", j["top1_agreement"].get<double>());
  }
  std::printf("time: %.2f s\n", j["seconds"].get<double>());
}

int run_eval(const EvalArgs& a) {
  const std::string text = read_text_file(a.text_file);
  LoadedModel m = load(a.model, a.tokenizer, a.exact_kquants);
  LoadedModel ref;
  std::vector<int32_t> new_to_old;
  if (!a.ref.empty()) {
    ref = load(a.ref, a.ref_tokenizer, /*exact_kquants=*/true);  // the reference as stored
    if (a.ref_map.empty()) {
      eval::check_same_vocab(*m.model, *m.tokenizer, *ref.model, *ref.tokenizer);
    } else {
      nlohmann::json map;
      try {
        map = nlohmann::json::parse(read_text_file(a.ref_map));
        new_to_old = map.at("new_to_old").get<std::vector<int32_t>>();
      } catch (const nlohmann::json::exception& e) {
        fail(a.ref_map, ": not a vocabulary map from pocket prune-vocab: ", e.what());
      }
      // The map must be this pair's: token k of the model is token
      // new_to_old[k] of the reference.
      const auto& mt = m.tokenizer->vocab().tokens;
      const auto& rt = ref.tokenizer->vocab().tokens;
      if (new_to_old.size() != mt.size())
        fail(a.ref_map, ": maps ", new_to_old.size(), " tokens, the model has ", mt.size());
      for (size_t k = 0; k < mt.size(); ++k)
        if (new_to_old[k] < 0 || static_cast<size_t>(new_to_old[k]) >= rt.size() || rt[new_to_old[k]] != mt[k])
          fail(a.ref_map, ": token ", k, " of the model is not token ", new_to_old[k], " of the reference");
    }
  }
  const std::vector<int32_t> tokens = eval::tokenize_for_eval(*m.tokenizer, text, a.text_file);

  eval::EvalOptions o;
  o.ctx = a.ctx;
  o.stride = a.stride;
  o.max_tokens = a.max_tokens;
  ModelOptions threads;
  threads.threads = a.threads;
  o.threads = threads.resolve_threads();
  o.kv = parse_kv_type(a.kv);
  o.add_bos = m.tokenizer->vocab().add_bos && m.tokenizer->vocab().bos_id >= 0;
  o.bos_id = m.tokenizer->vocab().bos_id;

  const auto t0 = std::chrono::steady_clock::now();
  const eval::EvalResult r = new_to_old.empty() ? eval::evaluate(*m.model, ref.model.get(), tokens, o)
                                                 : eval::evaluate_mapped(*m.model, *ref.model, tokens, new_to_old, o);
  // Characters of the evaluated text (all of it, or the --max-tokens prefix):
  // nats per character compare models whose tokenizers cut the text differently.
  const size_t n_eval = static_cast<size_t>(r.text_tokens);
  const std::string evaluated = m.tokenizer->decode(std::span<const int32_t>(tokens.data(), n_eval));
  int64_t chars = 0;
  for (unsigned char c : evaluated) chars += (c & 0xC0) != 0x80;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json j = {{"model", model_facts(m, a.model.empty() ? m.file->path : a.model)},
                      {"text_file", a.text_file},
                      {"text_tokens", r.text_tokens},
                      {"ctx", o.ctx},
                      {"kv", kv_type_name(o.kv)},
                      {"stride", eval::plan_stride(o)},
                      {"bos", o.add_bos},
                      {"windows", r.windows},
                      {"scored", r.model.count},
                      {"perplexity", r.model.perplexity()},
                      {"nll_mean", r.model.mean()},
                      {"chars", chars},
                      {"nll_per_char", chars ? r.model.sum / static_cast<double>(chars) : 0.0},
                      {"seconds", seconds}};
  if (r.has_reference) {
    j["reference"] = model_facts(ref, a.ref);
    j["reference_perplexity"] = r.reference.perplexity();
    j["kl_mean"] = r.kl_mean;
    j["kl_p99"] = r.kl_p99;
    j["kl_max"] = r.kl_max;
    j["top1_agreement"] = r.top1_agreement;
    if (r.mapped) {
      j["ref_map"] = a.ref_map;
      j["reference_nll_per_char"] = chars ? r.reference.sum / static_cast<double>(chars) : 0.0;
      j["reference_kept_perplexity"] = r.reference_kept.perplexity();
      j["reference_dropped_mass_mean"] = r.ref_dropped_mass_mean;
      j["reference_dropped_mass_max"] = r.ref_dropped_mass_max;
    }
  }
  if (a.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_text(j);
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, int& rc) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Perplexity on a text file; with --ref also KL divergence and top-1 agreement against a reference model");
  sub->add_option("-m,--model", a->model, "Model to evaluate (default: the default model)");
  sub->add_option("--tokenizer", a->tokenizer, "Tokenizer file for the model");
  CLI::Option* ref_opt = sub->add_option("--ref", a->ref, "Reference model (e.g. the F32 original); must share the vocabulary");
  sub->add_option("--ref-tokenizer", a->ref_tokenizer, "Tokenizer file for the reference model");
  sub->add_option("--ref-map", a->ref_map,
                  "The vocab_map.json of `pocket prune-vocab` when MODEL is REFERENCE with a pruned vocabulary")
      ->needs(ref_opt);
  sub->add_option("-f,--file", a->text_file, "Plain text file to evaluate on")->required();
  sub->add_option("--ctx", a->ctx, "Window length in tokens, BOS included (default 256)")->check(CLI::Range(2, 1 << 20));
  sub->add_option("--stride", a->stride, "Tokens between window starts (default ctx/2, at most ctx-1)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-tokens", a->max_tokens, "Evaluate only the first N text tokens (default: all)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 256));
  add_kv_option(*sub, a->kv);
  sub->add_flag("--json", a->json, "Print the results as JSON");
  sub->add_flag("--exact-kquants", a->exact_kquants,
                "Run MODEL's GGUF Q4_K / Q5_K weights as stored (the reference always runs them as stored)");
  sub->footer(
      "Every text token is scored once, in strided windows: windows of --ctx tokens start every --stride tokens\n"
      "and each scores only the tokens earlier windows did not, so past the first window every scored token has\n"
      "at least ctx - stride tokens of context. KL is KL(P_ref || P_model) in nats per scored position.\n"
      "With --ref-map the text is tokenized by MODEL (pruned) and the reference runs on the same tokens mapped to\n"
      "its ids; every target is a kept token; KL is over the kept tokens, the reference renormalised over them;\n"
      "the reference's perplexity is also given over its full vocabulary, with the probability it puts on\n"
      "dropped tokens.");
  sub->callback([a, &rc] { rc = run_eval(*a); });
}

}  // namespace pocket::cli
