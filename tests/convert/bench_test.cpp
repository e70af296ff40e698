// `pocket bench` end to end on a tiny created model: it runs and its --json
// output has the expected keys and sane (not timed) values.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/system.h"
#include "common/test_util.h"

namespace pocket {
namespace {

// Runs a shell command, returning stdout; the exit status goes to `rc`.
std::string run(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

TEST(BenchSystem, CacheSizesParseAsSysfsWritesThem) {
  EXPECT_EQ(bench::parse_cache_size("300M\n"), uint64_t{300} << 20);
  EXPECT_EQ(bench::parse_cache_size("2048K"), uint64_t{2048} << 10);
  EXPECT_EQ(bench::parse_cache_size("1G"), uint64_t{1} << 30);
  EXPECT_EQ(bench::parse_cache_size("65536"), uint64_t{65536});
  for (const char* bad : {"", "M", "12X", "-4K", "1.5M", "99999999999999K", "999999999999G"})
    EXPECT_FALSE(bench::parse_cache_size(bad).has_value()) << bad;
}

// The highest level wins over a larger lower-level cache; unreadable or
// malformed entries are skipped; no cache at all is nullopt.
// The bandwidth probe's staggered streams must still read every element of
// a slice exactly once: random 64-bit values, so a skipped or doubled
// element changes the sum (mod 2^64) with overwhelming probability.
TEST(BenchSystem, ProbeStreamsReadEverySliceElementOnce) {
  std::vector<uint64_t> buf(600000);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (uint64_t& v : buf) state ^= state << 13, state ^= state >> 7, state ^= state << 17, v = state;
  auto plain = [&](int64_t b, int64_t e) {
    uint64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += buf[static_cast<size_t>(i)];
    return s;
  };
  // Empty, shorter than four, unskewed quarters (q < 8), partly and fully
  // skewed (q / 8 against 8,744 elements), every remainder mod 4.
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0},    {5, 6},        {3, 10},       {0, 37},     {11, 100},
                                                {1, 4098}, {7, 70001},    {0, 280000},   {1, 280003}, {2, 599999},
                                                {0, 600000}, {100, 599998}};
  for (auto [b, e] : ranges) EXPECT_EQ(bench::sum_in_streams(buf.data(), b, e), plain(b, e)) << b << ".." << e;
}

TEST(BenchSystem, LastLevelCacheIsTheHighestLevelListed) {
  test::TempDir dir;
  auto cache = [&](int i, const char* level, const char* size) {
    const std::string d = dir.file("index" + std::to_string(i));
    std::filesystem::create_directories(d);
    std::ofstream(d + "/level") << level;
    if (size) std::ofstream(d + "/size") << size;
  };
  EXPECT_FALSE(bench::last_level_cache_bytes(dir.path()).has_value());
  cache(0, "1\n", "48K\n");
  cache(1, "1\n", "32K\n");
  cache(2, "2\n", "2048K\n");
  EXPECT_EQ(bench::last_level_cache_bytes(dir.path()), uint64_t{2048} << 10);
  cache(3, "3\n", "1536K\n");  // smaller than L2, still the last level
  cache(4, "4\n", "bogus\n");  // skipped
  cache(5, "4\n", nullptr);     // no size: skipped
  EXPECT_EQ(bench::last_level_cache_bytes(dir.path()), uint64_t{1536} << 10);
}

TEST(BenchCli, JsonHasTheReportedFields) {
  test::TempDir dir;
  const std::string model = dir.file("tiny.pocket");
  const std::string cli = pocket::test::cli_command();
  int rc = -1;
  run(cli + " create --preset tiny-qwen3 --weights q4 --group 32 -o " + model + " 2>&1", &rc);
  ASSERT_EQ(rc, 0);
  std::string out = run(cli + " bench -m " + model +
                            " -p 32 -n 8 -t 2 --runs 2 --bandwidth-bytes 67108864 --watts-per-core 4 --json",
                        &rc);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  for (const char* key : {"model", "format", "arch", "weights", "file_size_bytes", "threads", "kernels", "prompt_tokens",
                          "gen_tokens", "runs", "load_to_first_token_s", "prefill_tok_s", "decode_tok_s",
                          "baseline_rss_mb", "peak_rss_mb", "peak_rss_increase_mb", "bytes_per_token",
                          "kv_bytes_per_token", "bandwidth_bytes_s", "bandwidth_fraction", "roofline_tok_s",
                          "cpu_s_per_inference", "energy_j", "energy_source", "watts_per_core", "battery_fraction",
                          "bandwidth_probes_bytes_s", "bandwidth_probes", "bandwidth_interleaved",
                          "last_level_cache_bytes"})
    EXPECT_TRUE(j.contains(key)) << key;
  // The kernel level that ran, by its POCKET_ISA name.
  const std::string isa = j["kernels"].get<std::string>();
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avxvnni" || isa == "avx512" || isa == "avx512vbmi" || isa == "amx" || isa == "neon" ||
              isa == "dotprod" || isa == "i8mm")
      << isa;
  // One bandwidth probe per measured run, the reported figure their median.
  EXPECT_EQ(j["bandwidth_probes"], 2);
  EXPECT_EQ(j["bandwidth_bytes_s"], j["bandwidth_probes_bytes_s"]["median"]);
  EXPECT_LE(j["bandwidth_probes_bytes_s"]["min"].get<double>(), j["bandwidth_probes_bytes_s"]["max"].get<double>());
  EXPECT_GT(j["bandwidth_probes_bytes_s"]["min"].get<double>(), 0);
  // The probes' 64 MiB buffer is not part of the model's peak memory (the
  // tiny model itself adds a few MB).
  EXPECT_LT(j["peak_rss_increase_mb"].get<double>(), 32.0);
  for (const char* key : {"prefill_tok_s", "decode_tok_s"}) {
    EXPECT_LE(j[key]["min"].get<double>(), j[key]["median"].get<double>());
    EXPECT_LE(j[key]["median"].get<double>(), j[key]["max"].get<double>());
    EXPECT_GT(j[key]["min"].get<double>(), 0);
  }
  EXPECT_EQ(j["format"], "pocket");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["prompt_tokens"], 32);
  EXPECT_EQ(j["gen_tokens"], 8);
  EXPECT_GT(j["file_size_bytes"].get<double>(), 0);
  // KV bytes at the mean decode context (32 + 4.5 positions) of tiny-qwen3:
  // 2 (K, V) x 2 layers x 2 kv heads x 32 head_dim x 2 bytes x 36.5.
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"].get<double>(), 2.0 * 2 * 2 * 32 * 2 * 36.5);

  // What the KV cache stores per token of context: 2 x 2 x 2 x 32 x 2 bytes.
  EXPECT_DOUBLE_EQ(j["kv_cache_bytes_per_position"].get<double>(), 2.0 * 2 * 2 * 32 * 2);
  EXPECT_TRUE(j["ctx_sweep"].empty());

  // A context sweep: one decode rate per context, in order.
  out = run(cli + " bench -m " + model + " -p 8 -n 4 -t 1 --runs 1 --bandwidth-bytes 16777216 --ctx 16,40,100 --json",
            &rc);
  ASSERT_EQ(rc, 0) << out;
  j = nlohmann::json::parse(out);
  ASSERT_EQ(j["ctx_sweep"].size(), 3u) << out;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["ctx_sweep"][i]["context"], (std::vector<int>{16, 40, 100})[i]);
    EXPECT_GT(j["ctx_sweep"][i]["decode_tok_s"]["min"].get<double>(), 0);
    // Each point's fill starts where the previous point's decode ended.
    EXPECT_EQ(j["ctx_sweep"][i]["fill_from"], (std::vector<int>{0, 20, 44})[i]);
    EXPECT_GT(j["ctx_sweep"][i]["fill_tok_s"]["min"].get<double>(), 0);
    EXPECT_GT(j["ctx_sweep"][i]["rss_increase_mb"].get<double>(), 0);
  }
  std::string unsorted = run(cli + " bench -m " + model + " -p 8 -n 4 -t 1 --runs 1 --ctx 64,32 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(unsorted.find("--ctx values must rise"), std::string::npos) << unsorted;

  // The table form runs too and names its method.
  std::string table = run(cli + " bench -m " + model + " -p 8 -n 4 -t 1 --runs 1 --bandwidth-bytes 16777216", &rc);
  ASSERT_EQ(rc, 0) << table;
  EXPECT_NE(table.find("1 warm-up + 1 runs"), std::string::npos) << table;
  EXPECT_NE(table.find("median of 1 probes"), std::string::npos) << table;

  // Bad options fail with a message, not a crash.
  std::string bad = run(cli + " bench -m " + model + " -p 0 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(bad.find("-p"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pocket
