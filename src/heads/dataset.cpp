#include "heads/dataset.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::heads {

namespace {

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string ext_format(const std::string& path) {
  auto ends = [&](const char* e) {
    std::string x = e;
    return path.size() >= x.size() && path.compare(path.size() - x.size(), x.size(), x) == 0;
  };
  if (ends(".jsonl") || ends(".json")) return "jsonl";
  if (ends(".csv")) return "csv";
  if (ends(".tsv") || ends(".txt")) return "tsv";
  fail(path, ": cannot tell the data format from the name; give --format jsonl, csv or tsv");
}

std::string json_field(const nlohmann::json& row, const std::string& key, const std::string& where, bool required) {
  auto it = row.find(key);
  if (it == row.end() || it->is_null()) {
    if (required) fail(where, ": no field '", key, "'");
    return {};
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_boolean()) return it->get<bool>() ? "true" : "false";
  if (it->is_number()) return it->dump();
  fail(where, ": field '", key, "' is not a string or number");
}

}  // namespace

bool valid_utf8(const std::string& s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

std::vector<std::string> split_record(const std::string& s, size_t& pos, char sep, bool& ok) {
  std::vector<std::string> fields(1);
  ok = true;
  bool quoted = false, at_start = true;
  while (pos < s.size()) {
    const char c = s[pos++];
    if (quoted) {
      if (c == '"') {
        if (pos < s.size() && s[pos] == '"') {
          fields.back() += '"';
          ++pos;
        } else {
          quoted = false;
        }
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && at_start) {
      quoted = true;
      at_start = false;
    } else if (c == sep) {
      fields.emplace_back();
      at_start = true;
    } else if (c == '\n') {
      break;
    } else if (c == '\r' && pos < s.size() && s[pos] == '\n') {
      continue;
    } else {
      fields.back() += c;
      at_start = false;
    }
  }
  if (quoted) ok = false;  // the file ended inside a quoted field
  return fields;
}

std::vector<Example> load_examples(const std::string& path, const DataOptions& opt) {
  const std::string format = opt.format == "auto" ? ext_format(path) : opt.format;
  std::string data = read_text_file(path);
  if (data.size() >= 3 && data.compare(0, 3, "\xEF\xBB\xBF") == 0) data.erase(0, 3);  // a UTF-8 BOM
  const std::vector<std::string> text_cols = split_list(opt.text, ',');
  std::string where_col, where_val;
  if (!opt.where.empty()) {
    auto eq = opt.where.find('=');
    if (eq == std::string::npos) fail("--where '", opt.where, "': expected COLUMN=VALUE");
    where_col = opt.where.substr(0, eq), where_val = opt.where.substr(eq + 1);
  }
  std::vector<Example> out;
  auto finish = [&](Example e, const std::string& where) {
    if (!valid_utf8(e.text) || !valid_utf8(e.label) || !valid_utf8(e.query)) fail(where, ": text is not valid UTF-8");
    if (e.text.empty()) fail(where, ": empty text");
    if (opt.require_label && e.label.empty()) fail(where, ": empty label");
    out.push_back(std::move(e));
  };
  if (format == "jsonl") {
    size_t b = 0;
    int line = 0;
    while (b < data.size()) {
      size_t e = data.find('\n', b);
      if (e == std::string::npos) e = data.size();
      std::string row_text = data.substr(b, e - b);
      b = e + 1, ++line;
      if (row_text.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = path + ":" + std::to_string(line);
      nlohmann::json row;
      try {
        row = nlohmann::json::parse(row_text);
      } catch (const nlohmann::json::exception& ex) {
        fail(where, ": not a JSON object (", ex.what(), ")");
      }
      if (!row.is_object()) fail(where, ": not a JSON object");
      if (!where_col.empty() && json_field(row, where_col, where, true) != where_val) continue;
      Example ex;
      for (const std::string& c : text_cols) {
        std::string t = json_field(row, c, where, true);
        if (!t.empty()) ex.text += (ex.text.empty() ? "" : ". ") + t;
      }
      if (!opt.label.empty()) ex.label = json_field(row, opt.label, where, opt.require_label);
      if (!opt.query.empty()) ex.query = json_field(row, opt.query, where, true);
      finish(std::move(ex), where);
    }
    return out;
  }
  if (format != "csv" && format != "tsv") fail("--format '", format, "' is not supported (jsonl, csv or tsv)");
  const char sep = format == "csv" ? ',' : '\t';
  size_t pos = 0;
  int line = 0;
  std::vector<std::string> names;
  auto column = [&](const std::string& c) -> int {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == c) return static_cast<int>(i);
    if (all_digits(c) && c.size() < 6) return std::stoi(c);
    if (!opt.header) fail(path, ": column '", c, "' must be a 0-based index (the file has no header row)");
    fail(path, ": no column '", c, "' in the header");
  };
  std::vector<int> tcols;
  int lcol = -1, qcol = -1, wcol = -1;
  bool first = true;
  while (pos < data.size()) {
    const int record_line = line + 1;
    const size_t start = pos;
    bool ok = true;
    std::vector<std::string> f = split_record(data, pos, sep, ok);
    line += std::max(1, static_cast<int>(std::count(data.begin() + static_cast<std::ptrdiff_t>(start),
                                                    data.begin() + static_cast<std::ptrdiff_t>(pos), '\n')));
    const std::string where = path + ":" + std::to_string(record_line);
    if (!ok) fail(where, ": a quoted field is not closed");
    if (f.size() == 1 && f[0].empty()) continue;  // blank line
    if (first) {
      first = false;
      if (opt.header) names = f;
      for (const std::string& c : text_cols) tcols.push_back(column(c));
      if (!opt.label.empty()) lcol = column(opt.label);
      if (!opt.query.empty()) qcol = column(opt.query);
      if (!where_col.empty()) wcol = column(where_col);
      if (opt.header) continue;
    }
    auto get = [&](int c) -> const std::string& {
      if (c >= static_cast<int>(f.size())) fail(where, ": row has ", f.size(), " columns, column ", c, " is missing");
      return f[static_cast<size_t>(c)];
    };
    if (wcol >= 0 && get(wcol) != where_val) continue;
    Example ex;
    for (int c : tcols)
      if (!get(c).empty()) ex.text += (ex.text.empty() ? "" : ". ") + get(c);
    if (lcol >= 0) ex.label = get(lcol);
    if (qcol >= 0) ex.query = get(qcol);
    finish(std::move(ex), where);
  }
  return out;
}

std::vector<Example> subsample(std::vector<Example> all, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng() % i]);  // Fisher-Yates, portable
  if (n > 0 && static_cast<size_t>(n) < all.size()) all.resize(static_cast<size_t>(n));
  return all;
}

}  // namespace pocket::heads
