// Shared helpers of the libFuzzer targets in fuzz/: a per-process scratch
// directory for the files a target writes (the loaders are fed through the
// same open functions the CLI uses, which take paths), splitting one input
// into the parts of a multi-file model, and the outcome policy.
//
// Outcome policy: pocket::Error is the expected answer to a bad file and is
// swallowed by guarded(); any other exception escapes LLVMFuzzerTestOneInput
// and libFuzzer reports it as a crash ("deadly signal" from std::terminate),
// as it does for sanitizer reports, leaks, timeouts and the RSS/malloc limits.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "formats/model_file.h"
#include "generate/chat.h"
#include "model/model.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket::fuzz {

// A directory private to this process: $POCKET_FUZZ_TMP, else /dev/shm (a
// RAM disk: no disk wear at thousands of files a second), else $TMPDIR or
// /tmp. It is created on first use and removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string base;
    for (const char* env : {"POCKET_FUZZ_TMP", "TMPDIR"}) {
      if (const char* v = std::getenv(env); v && *v) {
        base = v;
        break;
      }
    }
    struct stat st;
    if (base.empty()) base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    std::string d = base + "/pocket-fuzz-" + std::to_string(getpid());
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "fuzz: cannot create scratch directory %s: %s\n", d.c_str(), std::strerror(errno));
      std::abort();
    }
    static std::string for_atexit = d;
    std::atexit([] {
      std::string cmd = "rm -rf '" + for_atexit + "'";
      if (std::system(cmd.c_str()) != 0) {
      }
    });
    return d;
  }();
  return dir;
}

// Path of `name` inside a subdirectory `sub` of the scratch directory (the
// subdirectory is created; "" = the scratch directory itself).
inline std::string scratch_path(const std::string& sub, const std::string& name) {
  std::string d = scratch_dir();
  if (!sub.empty()) {
    d += "/" + sub;
    mkdir(d.c_str(), 0700);
  }
  return d + "/" + name;
}

// Writes `n` bytes to `path` (replacing it); aborts on an I/O error, which
// would be a harness problem, not a finding.
inline void write_file(const std::string& path, const void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (n && std::fwrite(data, 1, n, f) != n) || std::fclose(f) != 0) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}
inline void write_file(const std::string& path, std::string_view s) { write_file(path, s.data(), s.size()); }

inline void remove_file(const std::string& path) { unlink(path.c_str()); }

// Multi-file inputs: the parts are separated by this line. It is in every
// dictionary, so mutations can add and remove parts; the seeds are written
// with it by fuzz/tools/make_seeds.cpp.
inline constexpr std::string_view kPartSeparator = "\n--pocket-fuzz-part--\n";

// Splits `data` at each separator into at most `max_parts` parts (the last
// part keeps any further separators); missing parts are empty.
inline std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    size_t at = in.find(kPartSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(in.substr(0, at));
    in.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(in);
  parts.resize(max_parts);
  return parts;
}

// Joins parts with the separator (the inverse of split_parts).
inline std::string join_parts(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += kPartSeparator;
    out += parts[i];
  }
  return out;
}

// Runs `f`; pocket::Error (a rejected input) is an expected outcome.
// Returns false when it was thrown.
template <class F>
bool guarded(F&& f) {
  try {
    f();
    return true;
  } catch (const pocket::Error&) {
    return false;
  }
}

// A property the code promises was broken (differential and round-trip
// checks): print what and stop, so libFuzzer saves the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

// Small consumer of leading option bytes.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t take_byte() {
    if (!n_) return 0;
    --n_;
    return *p_++;
  }
  std::string_view rest() const { return {reinterpret_cast<const char*>(p_), n_}; }

 private:
  const uint8_t* p_;
  size_t n_;
};

// Cycles over the fuzz bytes (a fixed pattern when there are none), for
// targets that need more values than the input has (kernel differentials).
class Stream {
 public:
  explicit Stream(std::string_view s) : s_(s) {}
  uint8_t next() { return s_.empty() ? static_cast<uint8_t>(i_++ * 37 + 11) : static_cast<uint8_t>(s_[i_++ % s_.size()]); }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// What the CLI does with a model file after opening it (`pocket info`, then
// load_model for `run`/`chat`): the info facts, the tokenizer (the file's
// own binary one or one built from the vocab), the chat-template family, a
// short encode/decode, and the Model built over the tensors. Each stage that
// rejects the input with pocket::Error ends it there.
inline void exercise_model(const std::string& path, const std::string& tokenizer_path = "") {
  OpenOptions o;
  o.tokenizer_path = tokenizer_path;
  o.require_vocab = false;
  auto file = std::make_shared<ModelFile>(open_model(path, o));
  size_t info_chars = 0;
  for (const auto& [k, v] : file->info) info_chars += k.size() + v.size();
  (void)info_chars;
  if (file->has_vocab) {
    guarded([&] {
      std::shared_ptr<const Tokenizer> tok = file->tokenizer ? file->tokenizer : Tokenizer::create(file->vocab);
      bool known = true;
      detect_chat_format(file->chat_template, *tok, &known);
      for (bool special : {false, true}) {
        EncodeOptions eo;
        eo.allow_special = special;
        eo.add_bos = special;
        std::vector<int32_t> ids = tok->encode("Once upon a time, \xe4\xb8\x96\xe7\x95\x8c <|im_start|>\n  12 ", eo);
        tok->decode(ids);
      }
    });
  }
  guarded([&] { Model m(file); });
}

// The real tokenizers of the shared folder, loaded once per process: the
// Qwen3 tokenizer.json (+ tokenizer_config.json) and llama2.c's tok512.bin.
// $POCKET_SHARED_DIR overrides the folder the build was configured with.
inline std::string shared_dir() {
  if (const char* v = std::getenv("POCKET_SHARED_DIR"); v && *v) return v;
  return POCKET_SHARED_DIR;
}

// The real tokenizers below: the targets that use them load them in
// LLVMFuzzerInitialize. A load takes about a second under ASan, which would
// otherwise count against the first input's time limit (-timeout, wall
// time); a fork-mode job starved of the CPU by other work then reported its
// first input as a timeout (session 27: two such inputs of
// fuzz_tokenize_diff ran in 0 ms on their own).
inline const std::shared_ptr<const Tokenizer>& qwen3_tokenizer_ptr() {
  static const std::shared_ptr<const Tokenizer> tok = [] {
    const std::string d = shared_dir() + "/tokenizers/qwen3/";
    return Tokenizer::create(vocab_from_hf_json(d + "tokenizer.json", d + "tokenizer_config.json", nullptr));
  }();
  return tok;
}
inline const Tokenizer& qwen3_tokenizer() { return *qwen3_tokenizer_ptr(); }

// The Qwen3 vocabulary plus the other chat families' markers as control
// tokens (Llama 3 headers, Gemma turns), so that every family's rendering
// can be encoded and checked with one tokenizer.
inline const Tokenizer& chat_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tok = [] {
    const std::string d = shared_dir() + "/tokenizers/qwen3/";
    Vocab v = vocab_from_hf_json(d + "tokenizer.json", d + "tokenizer_config.json", nullptr);
    for (const char* piece : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                              "<start_of_turn>", "<end_of_turn>"}) {
      v.tokens.emplace_back(piece);
      v.types.push_back(TokenType::Control);
      if (!v.scores.empty()) v.scores.push_back(0.0f);
    }
    return Tokenizer::create(std::move(v));
  }();
  return *tok;
}

inline const Tokenizer& tok512_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tok =
      Tokenizer::create(vocab_from_llama2c(shared_dir() + "/models/tok512.bin", 512));
  return *tok;
}

}  // namespace pocket::fuzz
