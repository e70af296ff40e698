// Tokenizer benchmark: encode throughput (MB/s, one core) on real Chinese and
// English text from shared/data, and load times of the Qwen3 tokenizer from
// tokenizer.json versus Pocket's binary form. Method: 1 warm-up, 5 timed
// runs, median. Both wall time and this thread's CPU time are reported: the
// shared build machine is often oversubscribed, and CPU time is then the
// fairer single-core figure.
//
// Usage: bench_tokenizer [--once] [shared_dir]
//   --once: build the tokenizer once and encode each text once, no timing
//   repeats; for instruction counts under
//   valgrind --tool=callgrind --toggle-collect='pocket::Tokenizer::encode*'.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Timing {
  double wall, cpu;  // medians, seconds
};

Timing median_seconds(const std::function<void()>& fn, int runs) {
  if (runs > 1) fn();  // warm-up
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    const auto a = Clock::now();
    const double c = thread_cpu_seconds();
    fn();
    cpu.push_back(thread_cpu_seconds() - c);
    wall.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[runs / 2], cpu[runs / 2]};
}

}  // namespace

int main(int argc, char** argv) try {
  std::string shared = POCKET_SHARED_DIR;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--once") runs = 1;
    else shared = argv[i];
  }
  const std::string dir = shared + "/tokenizers/qwen3";

  std::shared_ptr<const pocket::Tokenizer> tok;
  const Timing t_json = median_seconds([&] {
    tok = pocket::Tokenizer::create(
        pocket::vocab_from_hf_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json", nullptr));
  }, runs);
  const std::vector<uint8_t> bin = tok->serialize();
  const Timing t_bin = median_seconds([&] { tok = pocket::Tokenizer::deserialize(bin.data(), bin.size()); }, runs);

  const std::string zh = pocket::read_text_file(shared + "/data/zh/ChnSentiCorp_htl_all.csv");
  const std::string en = pocket::read_text_file(shared + "/data/en/wikitext2/test.txt");
  struct Case {
    const char* name;
    std::string text;
  };
  const std::vector<Case> cases = {{"zh_reviews", zh}, {"en_wikitext", en}, {"mixed", zh + en}};

  std::printf("Qwen3 tokenizer (%d tokens, %zu-byte binary form)\n", tok->vocab_size(), bin.size());
  std::printf("load tokenizer.json   %8.1f ms wall %8.1f ms cpu\n", t_json.wall * 1e3, t_json.cpu * 1e3);
  std::printf("load binary form      %8.1f ms wall %8.1f ms cpu\n", t_bin.wall * 1e3, t_bin.cpu * 1e3);
  std::string json = "{\"load_json_ms\":" + std::to_string(t_json.wall * 1e3) + ",\"load_binary_ms\":" +
                     std::to_string(t_bin.wall * 1e3) + ",\"load_binary_cpu_ms\":" + std::to_string(t_bin.cpu * 1e3);
  for (const auto& c : cases) {
    size_t n_tokens = 0;
    const Timing t = median_seconds([&] { n_tokens = tok->encode(c.text).size(); }, runs);
    const double mb = c.text.size() / 1e6;
    std::printf("encode %-12s %5.2f MB: %6.1f MB/s wall %6.1f MB/s cpu, %zu tokens (%.2f bytes/token)\n", c.name, mb,
                mb / t.wall, mb / t.cpu, n_tokens, double(c.text.size()) / n_tokens);
    json += ",\"encode_" + std::string(c.name) + "_mb_s\":" + std::to_string(mb / t.wall) + ",\"encode_" +
            std::string(c.name) + "_cpu_mb_s\":" + std::to_string(mb / t.cpu);
  }
  // App-sized inputs: each line of the mixed text encoded by its own call
  // (a review, a sentence), so per-call set-up costs show.
  std::vector<std::string_view> lines;
  const std::string& mixed = cases.back().text;
  for (size_t b = 0; b < mixed.size();) {
    size_t e = mixed.find('\n', b);
    e = e == std::string::npos ? mixed.size() : e + 1;
    lines.emplace_back(mixed.data() + b, e - b);
    b = e;
  }
  size_t n_line_tokens = 0;
  const Timing t_lines = median_seconds([&] {
    n_line_tokens = 0;
    for (std::string_view line : lines) n_line_tokens += tok->encode(line).size();
  }, runs);
  const double mb = mixed.size() / 1e6;
  std::printf("encode %-12s %5.2f MB: %6.1f MB/s wall %6.1f MB/s cpu, %zu calls, %zu tokens\n", "mixed/line", mb,
              mb / t_lines.wall, mb / t_lines.cpu, lines.size(), n_line_tokens);
  json += ",\"encode_mixed_per_line_mb_s\":" + std::to_string(mb / t_lines.wall) +
          ",\"encode_mixed_per_line_cpu_mb_s\":" + std::to_string(mb / t_lines.cpu);
  std::printf("%s}\n", json.c_str());
  return 0;
} catch (const pocket::Error& e) {
  std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
  return 1;
}
