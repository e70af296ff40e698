// Kernel benchmark: machine read bandwidth (1 and 2 threads), decode GEMV
// on PQ4 / Q4_0 at the pocket-0.3b shapes in GB/s and as a share of that
// bandwidth, and prefill GEMM tokens/s at n = 512. Each figure: 1 warm-up,
// 5 runs, median. Weights are cycled through enough copies to exceed the L3
// cache, as in a real forward pass where every layer's weights are new.
// --gemma: the GGUF block types of Gemma 3 270M's Q4_K_M file (Q8_0, Q5_0)
// at its shapes beside the PQ types they can be repacked into.
// --kquants: the GGUF K-quants of a Q4_K_M file (Q4_K, Q6_K) run as stored.
// --gemm-only: the GEMM table alone (quick A/B runs of the tile kernels).
// --tokens N: the GEMM table at n = N (e.g. 16, a speculative verify's size).
// --stream: a speculative verify's matmuls (n = 1, 8, 16, or --tokens N) over
// a pocket-0.3b-sized set of PQ4 weights (16 layers of six matrices, ~132 MB)
// used once per pass ("cold", read from memory) against the same calls on one
// layer's matrices ("hot", from L3): cold/hot near 1 means the weight read
// hides behind the compute; the table alone.
//   bench_kernels [--quick] [--gemma | --kquants] [--gemm-only | --stream] [--tokens N]   (POCKET_ISA selects the kernel level)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/kernels.h"
#include "core/pq_format.h"
#include "util/thread_pool.h"
#include "util/half.h"

namespace {

using namespace pocket;
using Clock = std::chrono::steady_clock;

double median_seconds(const std::function<void()>& fn, int runs = 5) {
  fn();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto s = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

uint64_t fill_state = 88172645463325252ull;
uint8_t next_byte() {
  fill_state ^= fill_state << 13, fill_state ^= fill_state >> 7, fill_state ^= fill_state << 17;
  return static_cast<uint8_t>(fill_state >> 32);
}

// Read bandwidth: sum a buffer far larger than the caches.
double read_bandwidth(ThreadPool& pool, const std::vector<uint64_t>& buf) {
  std::vector<uint64_t> sink(pool.size() * 8);
  double s = median_seconds([&] {
    pool.parallel_for(static_cast<int64_t>(buf.size()), [&](int64_t b, int64_t e, int ti) {
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int64_t i = b; i + 4 <= e; i += 4) a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
      sink[ti * 8] = a0 + a1 + a2 + a3;
    }, 1024);
  });
  return static_cast<double>(buf.size() * 8) / s / 1e9;
}

// A weight with random codes and sane fp16 scales (speed does not depend on
// the values; quantizing 65M weights with the search would take minutes).
struct Weight {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Weight make_weight(DType type, int64_t rows, int64_t cols, int group) {
  Weight w;
  w.bytes.resize(tensor_nbytes(type, {rows, cols}, group, "bench"));
  for (auto& b : w.bytes) b = next_byte();
  const uint16_t scale = f32_to_f16(0.01f);
  auto put = [&](size_t at) { std::memcpy(&w.bytes[at], &scale, 2); };
  if (type == DType::Q4_0 || type == DType::Q5_0 || type == DType::Q8_0) {
    const size_t bb = type == DType::Q4_0 ? 18 : type == DType::Q5_0 ? 22 : 34;
    for (size_t at = 0; at < w.bytes.size(); at += bb) put(at);
    if (type == DType::Q8_0)  // codes -127..127, as quantizers write them
      for (size_t at = 0; at < w.bytes.size(); at += bb)
        for (size_t k = 2; k < bb; ++k) w.bytes[at + k] = w.bytes[at + k] == 0x80 ? 0 : w.bytes[at + k];
  } else if (type == DType::Q4_K || type == DType::Q6_K) {  // d (and Q4_K's dmin) of each super-block
    const size_t bb = type == DType::Q4_K ? 144 : 210, at_d = type == DType::Q4_K ? 0 : 208;
    for (size_t at = 0; at < w.bytes.size(); at += bb) {
      put(at + at_d);
      if (type == DType::Q4_K) put(at + 2);
    }
  } else {
    const int64_t gb = pq::group_block_bytes(type, group);
    for (size_t blk = 0; blk < w.bytes.size(); blk += gb)
      for (int i = 0; i < 32; ++i) put(blk + 2 * i);  // 16 scales + 16 offsets
  }
  w.view = TensorView{"bench", type, {rows, cols}, w.bytes.data(), w.bytes.size(), group};
  return w;
}

struct Shape {
  int64_t in, out;
};

// --stream: n-token matmuls over weights read from memory vs from L3.
void stream_table(ThreadPool& pool1, ThreadPool& pool2, int tokens) {
  const Shape layer[] = {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {1024, 3072}, {3072, 1024}};
  constexpr int kLayers = 16;
  std::vector<std::vector<Weight>> ws(kLayers);
  size_t bytes = 0;
  for (auto& l : ws)
    for (const Shape& s : layer) {
      l.push_back(make_weight(DType::PQ4, s.out, s.in, 64));
      bytes += l.back().bytes.size();
    }
  const std::vector<int> ns = tokens ? std::vector<int>{1, tokens} : std::vector<int>{1, 8, 16};
  const int max_n = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(static_cast<size_t>(max_n) * 3072), y(static_cast<size_t>(max_n) * 3072);
  for (auto& v : x) v = static_cast<float>(next_byte()) / 128.0f - 1.0f;
  std::printf("\nPQ4/g64 matmuls of %d layers (%.1f MB), ms per pass (median of 9): cold = every matrix new, hot = "
              "layer 0's again\n", kLayers, static_cast<double>(bytes) / 1e6);
  for (int th : {1, 2}) {
    ThreadPool& pool = th == 1 ? pool1 : pool2;
    for (int n : ns) {
      auto pass = [&](bool hot) {
        return median_seconds([&] {
          for (int l = 0; l < kLayers; ++l)
            for (const Weight& w : ws[hot ? 0 : l]) kernels::matmul(w.view, x.data(), n, y.data(), &pool);
        }, 9);
      };
      const double cold = pass(false), hot = pass(true);
      std::printf("  %d thr  n = %2d: cold %7.2f ms (%5.1f GB/s)  hot %7.2f ms  cold/hot %.2f\n", th, n, 1e3 * cold,
                  static_cast<double>(bytes) / cold / 1e9, 1e3 * hot, cold / hot);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, gemma = false, kquants = false, gemm_only = false, stream = false;
  int tokens = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      tokens = std::atoi(argv[++i]);
      if (tokens < 1 || tokens > 4096) {
        std::fprintf(stderr, "bench_kernels: --tokens must be 1..4096\n");
        return 2;
      }
    }
    quick |= std::strcmp(argv[i], "--quick") == 0;
    gemma |= std::strcmp(argv[i], "--gemma") == 0;
    kquants |= std::strcmp(argv[i], "--kquants") == 0;
    gemm_only |= std::strcmp(argv[i], "--gemm-only") == 0;
    stream |= std::strcmp(argv[i], "--stream") == 0;
  }
  std::printf("isa: %s\n", kernels::active_isa());
  ThreadPool pool1(1), pool2(2);
  if (stream) {
    stream_table(pool1, pool2, tokens);
    return 0;
  }
  double bw[3] = {0, 0, 0};
  if (!gemm_only) {
    std::vector<uint64_t> buf((quick ? 128u : 1024u) << 17);  // 128 MiB / 1 GiB
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
    bw[1] = read_bandwidth(pool1, buf);
    bw[2] = read_bandwidth(pool2, buf);
    std::printf("read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n", bw[1], bw[2]);
  }
  struct Fmt {
    DType type;
    int group;
    const char* name;
  };
  std::vector<Shape> shapes = {{1024, 2048}, {1024, 3072}, {3072, 1024}, {1024, 64000}};
  std::vector<Fmt> fmts = {{DType::PQ4, 64, "PQ4/g64"}, {DType::PQ4, 128, "PQ4/g128"}, {DType::Q4_0, 0, "Q4_0"}};
  if (gemma) {
    shapes = {{640, 2048}, {2048, 640}, {640, 1024}, {640, 262144}};
    fmts = {{DType::Q8_0, 0, "Q8_0"}, {DType::PQ8, 32, "PQ8/g32"}, {DType::Q5_0, 0, "Q5_0"}, {DType::PQ4, 32, "PQ4/g32"}};
  } else if (kquants) {
    fmts = {{DType::Q4_K, 0, "Q4_K"}, {DType::Q6_K, 0, "Q6_K"}};
  }
  if (!gemm_only) {
    std::printf("\nGEMV (n = 1), GB/s of weights streamed and %% of read bandwidth:\n");
    for (const Fmt& f : fmts)
      for (const Shape& s : shapes) {
        Weight w0 = make_weight(f.type, s.out, s.in, f.group);
        const size_t copies = std::max<size_t>(1, (quick ? 64u << 20 : 256u << 20) / w0.bytes.size());
        std::vector<Weight> ws;
        for (size_t c = 0; c < copies; ++c) ws.push_back(c == 0 ? std::move(w0) : make_weight(f.type, s.out, s.in, f.group));
        std::vector<float> x(s.in, 0.5f), y(s.out);
        for (int th : {1, 2}) {
          ThreadPool& pool = th == 1 ? pool1 : pool2;
          double t = median_seconds([&] {
            for (auto& w : ws) kernels::matmul(w.view, x.data(), 1, y.data(), &pool);
          });
          double gbs = static_cast<double>(ws[0].bytes.size() * copies) / t / 1e9;
          std::printf("  %-8s %5lld -> %-5lld %d thr: %6.1f GB/s  %5.1f%%  (%.1f us/call)\n", f.name,
                      static_cast<long long>(s.in), static_cast<long long>(s.out), th, gbs, 100 * gbs / bw[th],
                      1e6 * t / static_cast<double>(copies));
        }
      }
  }
  const int n = tokens ? tokens : quick ? 64 : 512;
  std::printf("\nGEMM (n = %d), tokens/s:\n", n);
  for (const Fmt& f : fmts)
    for (const Shape& s : shapes) {
      if (s.out >= 64000) continue;  // the output head runs for the last position only
      Weight w = make_weight(f.type, s.out, s.in, f.group);
      std::vector<float> x(static_cast<size_t>(n) * s.in), y(static_cast<size_t>(n) * s.out);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(next_byte()) / 128.0f - 1.0f;
      for (int th : {1, 2}) {
        ThreadPool& pool = th == 1 ? pool1 : pool2;
        double t = median_seconds([&] { kernels::matmul(w.view, x.data(), n, y.data(), &pool); });
        std::printf("  %-8s %5lld -> %-5lld %d thr: %8.0f tok/s  %6.1f GMAC/s\n", f.name, static_cast<long long>(s.in),
                    static_cast<long long>(s.out), th, n / t, n * s.in * s.out / t / 1e9);
      }
    }
  return 0;
}
