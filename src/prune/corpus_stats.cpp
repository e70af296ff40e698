#include "prune/corpus_stats.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "tokenizer/unicode.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace pocket::prune {

Corpus Corpus::read(const std::string& path) { return from_text(read_text_file(path), path); }

Corpus Corpus::from_text(std::string text, const std::string& path) {
  Corpus c;
  c.path_ = path;
  c.text_ = std::make_shared<const std::string>(std::move(text));
  const std::string_view t = *c.text_;
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < t.size();) {
    size_t len;
    const uint32_t cp = unicode::decode(t, i, len);
    if (cp >= unicode::kInvalidBase)
      fail(path, ": not UTF-8: invalid byte 0x", std::hex, static_cast<unsigned>(static_cast<unsigned char>(t[i])),
           std::dec, " at line ", line, ", byte offset ", i);
    if (cp == '\n') {
      if (i > line_start) c.docs_.push_back(t.substr(line_start, i - line_start));
      ++line;
      line_start = i + 1;
    }
    i += len;
  }
  if (t.size() > line_start) c.docs_.push_back(t.substr(line_start));
  return c;
}

CountProgress terminal_count_progress(const std::string& label) {
  if (!isatty(STDERR_FILENO)) return {};
  return [label](uint64_t done, uint64_t total) {
    const int width = 30;
    const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int fill = static_cast<int>(f * width);
    std::fprintf(stderr, "\r  %s [%s%s] %3d%%", label.c_str(), std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), ' ').c_str(), static_cast<int>(f * 100));
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

namespace {

// Runs fn(doc, thread) over every document of every corpus on `threads`
// threads, reporting progress in bytes.
void for_each_doc(const std::vector<const Corpus*>& corpora, int threads,
                  const std::function<void(std::string_view, int)>& fn, const CountProgress& progress) {
  std::vector<std::string_view> docs;
  uint64_t total = 0;
  for (const Corpus* c : corpora) {
    docs.insert(docs.end(), c->docs().begin(), c->docs().end());
    total += c->bytes();
  }
  ThreadPool pool(std::max(1, threads));
  std::atomic<uint64_t> done{0};
  std::mutex report;
  // Batches of documents, so that the progress bar moves and threads stay
  // busy whatever the pool's chunking.
  const int64_t batch = 256;
  const int64_t batches = (static_cast<int64_t>(docs.size()) + batch - 1) / batch;
  pool.parallel_for(batches, [&](int64_t b, int64_t e, int thread) {
    for (int64_t k = b; k < e; ++k) {
      uint64_t bytes = 0;
      const size_t end = std::min(docs.size(), static_cast<size_t>((k + 1) * batch));
      for (size_t d = static_cast<size_t>(k * batch); d < end; ++d) {
        fn(docs[d], thread);
        bytes += docs[d].size() + 1;
      }
      const uint64_t now = done += bytes;
      if (progress) {
        std::lock_guard<std::mutex> lock(report);
        progress(std::min(now, total), total);
      }
    }
  });
  if (progress) progress(total, total);
}

}  // namespace

std::vector<uint64_t> count_tokens(const Tokenizer& tok, const std::vector<Corpus>& corpora, int threads,
                                   const CountProgress& progress) {
  const size_t n = static_cast<size_t>(tok.vocab_size());
  const int t = std::max(1, threads);
  std::vector<std::vector<uint64_t>> per_thread(static_cast<size_t>(t), std::vector<uint64_t>(n, 0));
  std::vector<const Corpus*> all;
  for (const Corpus& c : corpora) all.push_back(&c);
  for_each_doc(all, t, [&](std::string_view doc, int thread) {
    auto& counts = per_thread[static_cast<size_t>(thread)];
    for (int32_t id : tok.encode(doc)) ++counts[static_cast<size_t>(id)];
  }, progress);
  std::vector<uint64_t> out(n, 0);
  for (const auto& c : per_thread)
    for (size_t i = 0; i < n; ++i) out[i] += c[i];
  return out;
}

CompareStats compare_tokenizers(const Tokenizer& before, const Tokenizer& after, const std::vector<int32_t>& old_to_new,
                                const Corpus& corpus, int threads) {
  const int t = std::max(1, threads);
  std::vector<CompareStats> per_thread(static_cast<size_t>(t));
  for_each_doc({&corpus}, t, [&](std::string_view doc, int thread) {
    CompareStats& s = per_thread[static_cast<size_t>(thread)];
    ++s.docs;
    for (size_t i = 0; i < doc.size();) {
      size_t len;
      unicode::decode(doc, i, len);
      ++s.chars;
      i += len;
    }
    std::vector<int32_t> a = before.encode(doc);
    const std::vector<int32_t> b = after.encode(doc);
    s.tokens_before += a.size();
    s.tokens_after += b.size();
    bool all_kept = true;
    for (int32_t& id : a) {
      id = static_cast<size_t>(id) < old_to_new.size() ? old_to_new[static_cast<size_t>(id)] : -1;
      all_kept = all_kept && id >= 0;
      s.kept_before += id >= 0;
    }
    if (all_kept) {
      ++s.docs_all_kept;
      s.docs_all_kept_identical += a == b;
    }
    s.docs_round_trip += after.decode(b) == (after.vocab().nfc ? unicode::nfc(doc) : std::string(doc));
  }, {});
  CompareStats out;
  for (const auto& s : per_thread) {
    out.docs += s.docs;
    out.chars += s.chars;
    out.tokens_before += s.tokens_before;
    out.tokens_after += s.tokens_after;
    out.kept_before += s.kept_before;
    out.docs_all_kept += s.docs_all_kept;
    out.docs_all_kept_identical += s.docs_all_kept_identical;
    out.docs_round_trip += s.docs_round_trip;
  }
  return out;
}

}  // namespace pocket::prune
