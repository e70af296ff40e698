// The models the speculative-decoding tests share, each loaded once per
// test executable: stories260K and a tiny random-weight Qwen3 in PQ4.
#pragma once
#include "common/test_util.h"
#include "convert/create_model.h"
#include "generate/session.h"
#include "runtime/loader.h"

namespace pocket::test {

// Greedy decoding (temperature 0) of up to n tokens.
inline GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  return o;
}

inline const LoadedModel& stories() {
  static LoadedModel m = load_model(stories_model());
  return m;
}

inline const LoadedModel& synthetic_qwen3() {
  static TempDir dir;
  static LoadedModel m = [] {
    convert::CreateOptions co;
    co.preset = "tiny-qwen3";
    co.weights = DType::PQ4;
    co.group = 32;
    convert::create_model(co, dir.file("tiny-qwen3.pq4"));
    return load_model(dir.file("tiny-qwen3.pq4"));
  }();
  return m;
}

}  // namespace pocket::test
