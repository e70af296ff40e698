#include "heads/head_file.h"

#include <cctype>
#include <cstring>

#include "formats/gguf.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace pocket::heads {

namespace {

const char* const kTensors[] = {"w1", "b1", "w2", "b2", "mean", "inv_std"};

std::vector<float>* tensor_of(Head& h, const std::string& t) {
  if (t == "w1") return &h.net.w1;
  if (t == "b1") return &h.net.b1;
  if (t == "w2") return &h.net.w2;
  if (t == "b2") return &h.net.b2;
  if (t == "mean") return &h.mean;
  return &h.inv_std;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

void add_head(GgufWriter& w, const Head& h) {
  h.validate("head '" + h.name + "'");
  if (!valid_name(h.name)) fail("head name '", h.name, "' must be 1-64 letters, digits, '_' or '-'");
  const std::string p = "head." + h.name + ".";
  w.set_string(p + "base_hash", h.base_hash);
  w.set_string(p + "features", h.features.kind == FeatureSpec::Kind::Tokens ? "tokens" : "hidden");
  w.set_i32(p + "buckets", h.features.buckets);
  w.set_string(p + "pooling", pooling_name(h.features.pooling));
  w.set_i32(p + "layer", h.features.layer);
  w.set_string(p + "template", h.features.prompt_template);
  w.set(p + "labels", GgufMeta::strings(h.labels));
  w.set_i32(p + "feature_dim", h.net.in);
  w.set_i32(p + "hidden", h.net.hidden);
  w.set_f32(p + "temperature", h.temperature);
  w.set_f32(p + "threshold", h.threshold);
  w.set_string(p + "other_label", h.other_label);
  Head& m = const_cast<Head&>(h);  // tensor_of only reads here
  for (const char* t : kTensors) {
    const std::vector<float>& v = *tensor_of(m, t);
    if (v.empty()) continue;  // b1/w1 of a linear head
    std::vector<int64_t> shape = {static_cast<int64_t>(v.size())};
    if (std::string(t) == "w1") shape = {h.net.hidden, h.net.in};
    if (std::string(t) == "w2") shape = {h.net.out, h.net.out_in()};
    w.add_tensor(p + t, DType::F32, shape, v.data(), v.size() * sizeof(float));
  }
}

void save_head(const Head& h, const std::string& path) {
  GgufWriter w(32);
  w.set_u32("pocket.head_file.version", kHeadFileVersion);
  add_head(w, h);
  w.write(path);
}

std::vector<Head> read_heads(const GgufFile& g) {
  std::vector<Head> out;
  for (const auto& [key, value] : g.metadata()) {
    if (key.rfind("head.", 0) != 0 || key.size() < 12 || key.compare(key.size() - 7, 7, ".labels") != 0) continue;
    Head h;
    h.name = key.substr(5, key.size() - 12);
    const std::string p = "head." + h.name + ".";
    const std::string what = g.path() + ": head '" + h.name + "'";
    if (!valid_name(h.name)) fail(g.path(), ": head name '", h.name, "' is not valid");
    auto str = [&](const char* k, bool required) -> std::string {
      auto v = g.get_string(p + k);
      if (!v && required) fail(what, ": metadata '", p, k, "' is missing");
      return v ? std::string(*v) : std::string();
    };
    auto num = [&](const char* k) -> int64_t {
      auto v = g.get_int(p + k);
      if (!v) fail(what, ": metadata '", p, k, "' is missing");
      if (*v < -1 || *v > (int64_t{1} << 20)) fail(what, ": ", p, k, " = ", *v, " is out of range");
      return *v;
    };
    h.base_hash = str("base_hash", true);
    const std::string kind = str("features", true);
    if (kind != "hidden" && kind != "tokens") fail(what, ": feature kind '", kind, "' is not hidden or tokens");
    h.features.kind = kind == "tokens" ? FeatureSpec::Kind::Tokens : FeatureSpec::Kind::Hidden;
    h.features.buckets = static_cast<int>(num("buckets"));
    h.features.pooling = parse_pooling(str("pooling", true));
    h.features.layer = static_cast<int>(num("layer"));
    h.features.prompt_template = str("template", false);
    h.other_label = str("other_label", false);
    if (h.other_label.empty()) h.other_label = "other";
    for (std::string_view l : g.get_string_array(p + "labels", true)) h.labels.emplace_back(l);
    const int64_t in = num("feature_dim"), hidden = num("hidden");
    h.net.in = static_cast<int>(in), h.net.hidden = static_cast<int>(hidden);
    h.net.out = static_cast<int>(h.labels.size());
    auto fl = [&](const char* k) {
      auto v = g.get_float(p + k);
      if (!v) fail(what, ": metadata '", p, k, "' is missing");
      return static_cast<float>(*v);
    };
    h.temperature = fl("temperature");
    h.threshold = fl("threshold");
    // Sizes first (hostile values fail here, before anything is allocated)...
    if (in < 1 || hidden < 0 || hidden > (1 << 16) || h.net.out < 2 || h.net.out > (1 << 16))
      fail(what, ": shape ", in, " -> ", hidden, " -> ", h.net.out, " is not a valid head");
    const uint64_t want[] = {static_cast<uint64_t>(hidden * in), static_cast<uint64_t>(hidden),
                             static_cast<uint64_t>(h.net.out) * static_cast<uint64_t>(hidden > 0 ? hidden : in),
                             static_cast<uint64_t>(h.net.out), static_cast<uint64_t>(in), static_cast<uint64_t>(in)};
    // ...then each tensor is found, checked against that size and copied.
    for (size_t t = 0; t < std::size(kTensors); ++t) {
      const std::string name = p + kTensors[t];
      const GgufTensorInfo* info = nullptr;
      for (const GgufTensorInfo& ti : g.tensors())
        if (ti.name == name) info = &ti;
      if (want[t] == 0 && !info) continue;
      if (!info) fail(what, ": tensor '", name, "' is missing");
      if (info->type != DType::F32) fail(what, ": tensor '", name, "' is not F32");
      if (info->nbytes != want[t] * sizeof(float))
        fail(what, ": tensor '", name, "' holds ", info->nbytes, " bytes, the head's shape needs ", want[t] * sizeof(float));
      std::vector<float>& v = *tensor_of(h, kTensors[t]);
      v.resize(want[t]);
      std::memcpy(v.data(), g.tensor_data(*info), info->nbytes);
    }
    h.validate(what);
    out.push_back(std::move(h));
  }
  return out;
}

Head load_head(const std::string& spec) {
  std::string path = spec, name;
  if (auto hash = spec.rfind('#'); hash != std::string::npos) path = spec.substr(0, hash), name = spec.substr(hash + 1);
  GgufFile g = GgufFile::parse(MappedFile::open(path));
  std::vector<Head> all = read_heads(g);
  if (all.empty()) fail(path, ": holds no decision head (no head.<name>.labels key)");
  if (name.empty()) {
    if (all.size() > 1) {
      std::string names;
      for (const Head& h : all) names += (names.empty() ? "" : ", ") + h.name;
      fail(path, ": holds ", all.size(), " heads (", names, "); choose one with ", path, "#NAME");
    }
    return std::move(all[0]);
  }
  for (Head& h : all)
    if (h.name == name) return std::move(h);
  fail(path, ": holds no head named '", name, "'");
}

void check_base(const Head& h, const std::string& model_hash, const std::string& head_path) {
  if (h.base_hash != model_hash)
    fail(head_path, ": head '", h.name, "' was trained on the model with content hash ", h.base_hash,
         ", but the loaded model's hash is ", model_hash, " (a head only works with its base model)");
}

}  // namespace pocket::heads
