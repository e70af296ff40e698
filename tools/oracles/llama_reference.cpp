// llama.cpp as an independent reference for a real model file: greedy
// continuations with the top-k logits of every step, and tokenizations.
// Built against a scratch build of llama.cpp (the llama-cpp-python sdist,
// see tools/oracles/make_llama_reference.sh); never part of Pocket.
//
//   llama_reference MODEL CASES.json OUT.json
//
// CASES: {"top_k": 8, "generate": [{"prompt": "...", "n": 16}, ...],
//         "tokenize": ["text", ...]}
// OUT:   {"generate": [{"prompt": ..., "prompt_ids": [...], "ids": [...],
//          "top": [[[id, logit], ...] per generated token]}],
//         "tokenize": [[ids], ...]}
// Prompts are tokenized with special tokens parsed and BOS added (as a chat
// prompt is); "tokenize" texts as plain text without BOS.
#include <llama.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool special) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), special, special);
  if (n < 0) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), special, special);
  }
  if (n < 0) throw std::runtime_error("llama_tokenize failed");
  ids.resize(static_cast<size_t>(n));
  return ids;
}

json top_logits(const float* logits, int n_vocab, int k, llama_token* best) {
  std::vector<int> order(static_cast<size_t>(n_vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  *best = order[0];
  json top = json::array();
  for (int i = 0; i < k; ++i) top.push_back({order[i], logits[order[i]]});
  return top;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL CASES.json OUT.json\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2]);
  const json cases = json::parse(in);
  const int top_k = cases.value("top_k", 8);

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  json out;
  out["generate"] = json::array();
  for (const json& c : cases.value("generate", json::array())) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = 4096;
    cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) throw std::runtime_error("cannot create a llama.cpp context");
    const std::string prompt = c.at("prompt");
    std::vector<llama_token> ids = tokenize(vocab, prompt, true);
    json r{{"prompt", prompt}, {"prompt_ids", ids}, {"ids", json::array()}, {"top", json::array()}};
    llama_batch batch = llama_batch_get_one(ids.data(), static_cast<int32_t>(ids.size()));
    for (int step = 0; step < c.value("n", 16); ++step) {
      if (llama_decode(ctx, batch) != 0) throw std::runtime_error("llama_decode failed");
      llama_token best;
      r["top"].push_back(top_logits(llama_get_logits_ith(ctx, -1), n_vocab, top_k, &best));
      r["ids"].push_back(best);
      static llama_token next;
      next = best;
      batch = llama_batch_get_one(&next, 1);
    }
    out["generate"].push_back(r);
    llama_free(ctx);
  }
  out["tokenize"] = json::array();
  for (const json& t : cases.value("tokenize", json::array())) out["tokenize"].push_back(tokenize(vocab, t, false));

  std::ofstream(argv[3]) << out.dump(1) << "\n";
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
