#include "constrain/json_schema.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "constrain/regex.h"
#include "constrain/syntax.h"
#include "util/error.h"

namespace pocket::constrain {

namespace {

using json = nlohmann::ordered_json;
constexpr long long kMaxInt = 9999999999999999LL;  // 16 digits

std::string pointer_token(std::string_view k) {
  std::string out;
  for (char c : k) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string same_len(const std::string& x, const std::string& y) {
  if (x == y) return x;
  if (x.size() == 1) return cat("[", x, "-", y, "]");
  if (x[0] == y[0]) return x.substr(0, 1) + same_len(x.substr(1), y.substr(1));
  const std::string xr = x.substr(1), yr = y.substr(1);
  const bool x_zero = xr.find_first_not_of('0') == std::string::npos;
  const bool y_nine = yr.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> parts;
  char mid_lo = x[0] + 1, mid_hi = y[0] - 1;
  if (x_zero) mid_lo = x[0];
  else parts.push_back(x.substr(0, 1) + same_len(xr, std::string(xr.size(), '9')));
  if (y_nine) mid_hi = y[0];
  if (mid_lo <= mid_hi) parts.push_back(cat("[", mid_lo, "-", mid_hi, "][0-9]{", xr.size(), "}"));
  if (!y_nine) parts.push_back(y.substr(0, 1) + same_len(std::string(yr.size(), '0'), yr));
  std::string out = "(?:";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + parts[i];
  return out + ")";
}

// Non-negative integers in [a, b], no leading zeros. The lengths all of whose
// numbers lie in the range are one counted repetition: a parse of a long
// number then lives on one stack, not one per length (each with a count of
// its own: a mask per digit split the state once per length).
std::string nonneg_range(long long a, long long b) {
  std::string sa = std::to_string(a), sb = std::to_string(b);
  if (sa.size() == sb.size()) return same_len(sa, sb);
  std::vector<std::string> parts;
  size_t full_lo = sa.size() + 1, full_hi = sb.size() - 1;  // lengths of the repetition
  if (sa[0] == '1' && sa.find_first_not_of('0', 1) == std::string::npos)
    full_lo = sa.size();
  else
    parts.push_back(same_len(sa, std::string(sa.size(), '9')));
  if (sb == std::string(sb.size(), '9'))
    full_hi = sb.size();
  else
    parts.push_back(same_len(std::string("1").append(sb.size() - 1, '0'), sb));
  if (full_lo == 1 && full_hi == 1)
    parts.push_back("[1-9]");
  else if (full_lo <= full_hi)
    parts.push_back(cat("[1-9][0-9]{", full_lo - 1, ",", full_hi - 1, "}"));
  std::string out = "(?:";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + parts[i];
  return out + ")";
}

}  // namespace

std::string integer_range_regex(long long lo, long long hi) {
  std::vector<std::string> parts;
  if (hi >= 0) parts.push_back(nonneg_range(std::max(lo, 0LL), hi));
  if (lo < 0) {  // -0 is 0 in JSON: allowed where 0 is
    std::string neg = nonneg_range(std::max(hi < 0 ? -hi : 1LL, 1LL), -lo);
    parts.push_back(hi >= 0 ? "-(?:0|" + neg + ")" : "-" + neg);
  }
  if (lo == 0) parts.push_back("-0");
  if (parts.size() == 1) return parts[0];
  return "(?:" + parts[0] + "|" + parts[1] + ")";
}

namespace {

const std::set<std::string, std::less<>> kAnnotations = {
    "$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding", "$anchor"};
const std::set<std::string, std::less<>> kSupported = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "$ref"};

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonOptions& opt) : root_(root), open_(opt.open) {
    if (opt.max_ws < 0 || opt.max_ws > 64) fail_as(ErrorCode::InvalidArgument, "JSON whitespace limit ", opt.max_ws, " must be in [0, 64]");
    if (opt.max_ws > 0) {
      ByteSet ws;
      ws.set(' '), ws.set('\n'), ws.set('\t'), ws.set('\r');
      ws_ = b_.repeat({{b_.bytes(ws)}}, 0, opt.max_ws, "ws");
    }
  }

  Grammar finish_with(Elem top) {
    int root = b_.add_rule("root");
    b_.define(root, {{top}});
    return std::move(b_).finish(root);
  }

  Elem schema(const json& s, const std::string& ptr, int depth) {
    if (depth > Limits::kMaxNesting) err(ptr, "schemas nested too deeply");
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      int r = b_.add_rule(ptr.empty() ? "#" : ptr);  // matches nothing
      b_.define(r, {});
      return {true, r};
    }
    if (!s.is_object()) err(ptr, "a schema must be an object or a boolean");
    for (auto& [k, v] : s.items()) {
      if (kAnnotations.count(k)) continue;
      if (!kSupported.count(k)) err(ptr + "/" + pointer_token(k), cat("unsupported keyword '", k, "'"));
    }
    if (s.contains("$ref")) {
      for (auto& [k, v] : s.items())
        if (k != "$ref" && !kAnnotations.count(k))
          err(ptr + "/" + pointer_token(k), cat("keyword '", k, "' beside $ref is not supported"));
      return ref(s["$ref"], ptr + "/$ref", depth);
    }
    if (s.contains("allOf")) return schema(merge_all_of(s, ptr, depth), ptr, depth + 1);
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      const json& list = s[kw];
      const std::string p = ptr + "/" + kw;
      if (!list.is_array() || list.empty()) err(p, "must be a non-empty array");
      for (auto& [k, v] : s.items())
        if (k != kw && !kAnnotations.count(k))
          err(ptr + "/" + pointer_token(k), cat("keyword '", k, "' beside ", kw, " is not supported (move it into the branches)"));
      Alts alts;
      for (size_t i = 0; i < list.size(); ++i) alts.push_back({schema(list[i], cat(p, "/", i), depth + 1)});
      return b_.group(std::move(alts), p);
    }
    if (s.contains("const")) return {true, literal_rule({s["const"]}, ptr + "/const")};
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) err(ptr + "/enum", "must be a non-empty array");
      if (e.size() > Limits::kMaxEnum) err(ptr + "/enum", cat("too many values (", e.size(), ", at most ", Limits::kMaxEnum, ")"));
      std::vector<json> vals;
      for (auto& v : e)
        if (!s.contains("type") || type_matches(v, s["type"])) vals.push_back(v);
      if (vals.empty()) err(ptr + "/enum", "no value has the schema's type");
      return {true, literal_rule(vals, ptr + "/enum")};
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (auto& x : t) {
          if (!x.is_string()) err(ptr + "/type", "must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      else err(ptr + "/type", "must be a string or an array of strings");
      if (types.empty()) err(ptr + "/type", "is empty");
    } else {
      // No type: infer from the keywords, else any value.
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) types.push_back("object");
      if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
        types.push_back("array");
      if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
        types.push_back("string");
      if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
        types.push_back("number");
      if (types.empty()) return any_value();
    }
    Alts alts;
    for (auto& t : types) alts.push_back({typed(s, t, ptr, depth)});
    return b_.group(std::move(alts), ptr);
  }

  Elem any_value() {
    if (any_ >= 0) return {true, any_};
    any_ = b_.add_rule("json-value");
    const Elem str = string_elem(0, -1);
    const Elem num = number_elem();
    // object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
    Seq member{str};
    append(member, ws_);
    member.push_back(b_.byte(':'));
    append(member, ws_);
    member.push_back({true, any_});
    Seq more = ws_;
    more.push_back(b_.byte(','));
    append(more, ws_);
    append(more, member);
    Seq members = member;
    append(members, b_.repeat({more}, 0, -1, "members"));
    Seq obj{b_.byte('{')};
    append(obj, ws_);
    obj.push_back(b_.group({members, {}}, "members?"));
    append(obj, ws_);
    obj.push_back(b_.byte('}'));
    Seq vmore = ws_;
    vmore.push_back(b_.byte(','));
    append(vmore, ws_);
    vmore.push_back({true, any_});
    Seq values{Elem{true, any_}};
    append(values, b_.repeat({vmore}, 0, -1, "values"));
    Seq arr{b_.byte('[')};
    append(arr, ws_);
    arr.push_back(b_.group({values, {}}, "values?"));
    append(arr, ws_);
    arr.push_back(b_.byte(']'));
    b_.define(any_, {obj, arr, {str}, {num}, b_.literal("true"), b_.literal("false"), b_.literal("null")});
    return {true, any_};
  }

 private:
  [[noreturn]] static void err(const std::string& ptr, const std::string& msg) {
    fail_as(ErrorCode::InvalidArgument, "JSON Schema: ", msg, " at ", ptr.empty() ? "/" : ptr);
  }
  static void append(Seq& a, const Seq& b) { a.insert(a.end(), b.begin(), b.end()); }

  static bool type_matches(const json& v, const json& t) {
    auto one = [&](const std::string& n) {
      if (n == "string") return v.is_string();
      if (n == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
      if (n == "number") return v.is_number();
      if (n == "boolean") return v.is_boolean();
      if (n == "null") return v.is_null();
      if (n == "object") return v.is_object();
      if (n == "array") return v.is_array();
      return false;
    };
    if (t.is_string()) return one(t.get<std::string>());
    if (t.is_array())
      for (auto& x : t)
        if (x.is_string() && one(x.get<std::string>())) return true;
    return false;
  }

  int literal_rule(const std::vector<json>& vals, const std::string& ptr) {
    Alts alts;
    for (auto& v : vals) alts.push_back(b_.literal(v.dump()));
    int r = b_.add_rule(ptr);
    b_.define(r, std::move(alts));
    return r;
  }

  const json& resolve(const json& ref, const std::string& ptr) {
    if (!ref.is_string()) err(ptr, "$ref must be a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') err(ptr, cat("only local references (\"#...\") are supported, not '", r, "'"));
    if (r.size() > 1 && r[1] != '/') err(ptr, cat("$ref '", r, "': anchors are not supported"));
    try {
      json::json_pointer p(r.substr(1));
      if (!root_.contains(p)) err(ptr, cat("$ref '", r, "' points to nothing"));
      return root_.at(p);
    } catch (const json::exception&) {
      err(ptr, cat("$ref '", r, "' is not a valid JSON pointer"));
    }
  }

  Elem ref(const json& ref, const std::string& ptr, int depth) {
    const std::string r = ref.is_string() ? ref.get<std::string>() : "";
    auto it = refs_.find(r);
    if (it != refs_.end()) return {true, it->second};
    const json& target = resolve(ref, ptr);
    int rule = b_.add_rule(r);
    refs_[r] = rule;
    Elem body = schema(target, r.substr(1), depth + 1);
    b_.define(rule, {{body}});
    return {true, rule};
  }

  json merge_all_of(const json& s, const std::string& ptr, int depth) {
    json merged = json::object();
    // additionalProperties: false in one part forbids every property that
    // part does not list itself (JSON Schema semantics: it does not see the
    // other parts' properties).
    std::vector<std::set<std::string>> closed;
    auto add = [&](const json& part, const std::string& p, auto& self, int d) -> void {
      if (d > Limits::kMaxNesting) err(p, "allOf nested too deeply");
      if (part.is_boolean()) {
        if (!part.get<bool>()) err(p, "allOf contains false: the schema matches nothing");
        return;
      }
      if (!part.is_object()) err(p, "a schema must be an object or a boolean");
      if (part.contains("$ref")) {
        self(resolve(part["$ref"], p + "/$ref"), p + "/$ref", self, d + 1);
        for (auto& [k, v] : part.items())
          if (k != "$ref" && !kAnnotations.count(k)) err(p + "/" + pointer_token(k), cat("keyword '", k, "' beside $ref is not supported"));
        return;
      }
      for (auto& [k, v] : part.items()) {
        const std::string kp = p + "/" + pointer_token(k);
        if (kAnnotations.count(k)) continue;
        if (k == "allOf") {
          if (!v.is_array()) err(kp, "must be an array");
          for (size_t i = 0; i < v.size(); ++i) self(v[i], cat(kp, "/", i), self, d + 1);
        } else if (k == "properties") {
          if (!v.is_object()) err(kp, "must be an object");
          json& props = merged["properties"];
          if (props.is_null()) props = json::object();
          for (auto& [name, sub] : v.items()) {
            if (props.contains(name) && props[name] != sub)
              err(kp + "/" + pointer_token(name), cat("allOf: property '", name, "' is defined differently in two branches"));
            props[name] = sub;
          }
        } else if (k == "required") {
          if (!v.is_array()) err(kp, "must be an array");
          json& req = merged["required"];
          if (req.is_null()) req = json::array();
          for (auto& x : v)
            if (std::find(req.begin(), req.end(), x) == req.end()) req.push_back(x);
        } else if (k == "type") {
          if (v != "object") err(kp, "allOf is supported for object schemas only");
          merged["type"] = "object";
        } else if (k == "additionalProperties") {
          if (!v.is_boolean()) err(kp, "allOf with an additionalProperties schema is not supported");
          if (v == false) {
            std::set<std::string> own;
            if (part.contains("properties") && part["properties"].is_object())
              for (auto& [name, sub] : part["properties"].items()) own.insert(name);
            closed.push_back(std::move(own));
          }
        } else {
          err(kp, cat("allOf is supported for object schemas only (properties, required, additionalProperties), not '", k, "'"));
        }
      }
    };
    add(s, ptr, add, depth);
    if (!merged.contains("type")) merged["type"] = "object";
    if (!closed.empty()) {
      json props = json::object();
      if (merged.contains("properties"))
        for (auto& [name, sub] : merged["properties"].items()) {
          bool ok = true;
          for (auto& c : closed) ok = ok && c.count(name);
          if (ok) props[name] = sub;
        }
      if (merged.contains("required"))
        for (auto& r : merged["required"])
          if (!props.contains(r.get<std::string>()))
            err(ptr + "/allOf", cat("required property '", r.get<std::string>(),
                                   "' is forbidden by additionalProperties: false in another part: no object fits"));
      merged["properties"] = props;
      merged["additionalProperties"] = false;
    }
    return merged;
  }

  Elem typed(const json& s, const std::string& t, const std::string& ptr, int depth) {
    if (t == "string") return string_schema(s, ptr);
    if (t == "integer") return integer_schema(s, ptr);
    if (t == "number") return number_schema(s, ptr);
    if (t == "boolean") return b_.group({b_.literal("true"), b_.literal("false")}, "boolean");
    if (t == "null") return b_.group({b_.literal("null")}, "null");
    if (t == "object") return object_schema(s, ptr, depth);
    if (t == "array") return array_schema(s, ptr, depth);
    err(ptr + "/type", cat("unknown type '", t, "'"));
  }

  static int count_kw(const json& s, const char* kw, const std::string& ptr, int dflt) {
    if (!s.contains(kw)) return dflt;
    const json& v = s[kw];
    const std::string p = ptr + "/" + kw;
    if (!v.is_number_integer() || v.get<long long>() < 0) err(p, "must be a non-negative integer");
    if (v.get<long long>() > Limits::kMaxRepeat) err(p, cat("is too large (at most ", Limits::kMaxRepeat, ")"));
    return static_cast<int>(v.get<long long>());
  }

  Elem string_elem(int min, int max) {
    auto key = std::make_pair(min, max);
    if (auto it = strings_.find(key); it != strings_.end()) return it->second;
    if (char_ < 0) {
      char_ = b_.add_rule("json-char");
      b_.define(char_, json_string_chars(b_, {{0, 0x10FFFF}}));
    }
    Seq seq{b_.byte('"')};
    append(seq, b_.repeat({{Elem{true, char_}}}, min, max, "chars"));
    seq.push_back(b_.byte('"'));
    Elem e = b_.group({seq}, "string");
    strings_[key] = e;
    return e;
  }

  Elem regex_string(const std::string& re, const std::string& ptr) {
    try {
      GrammarBuilder& b = b_;
      RegexParse p = parse_regex(b, re, true);
      Seq seq{b_.byte('"')};
      Elem any_chars{};
      if (!p.anchored_start || !p.anchored_end) {
        if (char_ < 0) string_elem(0, -1);
        Seq star = b_.repeat({{Elem{true, char_}}}, 0, -1, "chars");
        any_chars = b_.group({star}, "any-chars");
      }
      if (!p.anchored_start) seq.push_back(any_chars);
      seq.push_back(b_.group(std::move(p.alts), "pattern"));
      if (!p.anchored_end) seq.push_back(any_chars);
      seq.push_back(b_.byte('"'));
      return b_.group({seq}, "string");
    } catch (const Error& e) {
      err(ptr, e.what());
    }
  }

  Elem string_schema(const json& s, const std::string& ptr) {
    const int min = count_kw(s, "minLength", ptr, 0);
    const int max = count_kw(s, "maxLength", ptr, -1);
    if (max >= 0 && max < min) err(ptr + "/maxLength", "is smaller than minLength: no string fits");
    if (s.contains("format")) {
      const json& f = s["format"];
      if (!f.is_string()) err(ptr + "/format", "must be a string");
      if (s.contains("pattern")) err(ptr + "/pattern", "pattern together with format is not supported");
      if (s.contains("minLength") || s.contains("maxLength")) err(ptr + "/format", "format with minLength/maxLength is not supported");
      static const std::string d = "(?:0[1-9]|1[0-9]|2[0-8])";
      static const std::string date = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(?:(?:0[13578]|1[02])-(?:" + d + "|29|3[01])|(?:0[469]|11)-(?:" + d +
                                      "|29|30)|02-" + d + ")";
      static const std::string time = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
      static const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
      // RFC 5322 atext: the characters of a dot-atom local part.
      static const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
      static const std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
      static const std::map<std::string, std::string, std::less<>> formats = {
          {"date", date},
          {"time", time},
          {"date-time", date + "[Tt]" + time},  // RFC 3339 5.6: T and Z may be lowercase
          {"email", atext + "{1,32}(?:\\." + atext + "{1,32}){0,3}@" + label + "(?:\\." + label + "){1,3}"},
          {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
          {"ipv4", octet + "(?:\\." + octet + "){3}"}};
      auto it = formats.find(f.get<std::string>());
      if (it == formats.end()) err(ptr + "/format", cat("unsupported format '", f.get<std::string>(), "'"));
      return regex_string("^" + it->second + "$", ptr + "/format");
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) err(ptr + "/pattern", "must be a string");
      if (s.contains("minLength") || s.contains("maxLength"))
        err(ptr + "/pattern", "pattern together with minLength/maxLength is not supported (put the length in the pattern)");
      return regex_string(s["pattern"].get<std::string>(), ptr + "/pattern");
    }
    return string_elem(min, max);
  }

  Elem from_regex(const std::string& re, const char* hint) {
    RegexParse p = parse_regex(b_, re);
    return b_.group(std::move(p.alts), hint);
  }

  // An integral bound; `ok_fraction` says whether a non-integral one is fine
  // (rounded inward) or an error.
  static std::optional<long long> bound(const json& s, const char* kw, const std::string& ptr, bool is_int, bool upper) {
    if (!s.contains(kw)) return std::nullopt;
    const json& v = s[kw];
    const std::string p = ptr + "/" + kw;
    if (!v.is_number()) err(p, "must be a number");
    double x = v.get<double>();
    if (!std::isfinite(x) || std::fabs(x) > static_cast<double>(kMaxInt)) err(p, "is out of the supported range (16 digits)");
    const bool exclusive = std::string_view(kw).starts_with("exclusive");
    if (!is_int) {
      if (exclusive) err(p, "exclusive bounds on numbers are not supported (use integer or minimum/maximum)");
      if (std::floor(x) != x) err(p, "non-integral bounds on numbers are not supported");
      return static_cast<long long>(x);
    }
    long long b = upper ? static_cast<long long>(std::floor(x)) : static_cast<long long>(std::ceil(x));
    if (exclusive && static_cast<double>(b) == x) b += upper ? -1 : 1;
    return b;
  }

  static void bounds(const json& s, const std::string& ptr, bool is_int, long long& lo, long long& hi, bool& has) {
    lo = -kMaxInt, hi = kMaxInt, has = false;
    for (auto [kw, upper] : {std::pair{"minimum", false}, {"exclusiveMinimum", false}, {"maximum", true}, {"exclusiveMaximum", true}}) {
      auto b = bound(s, kw, ptr, is_int, upper);
      if (!b) continue;
      has = true;
      if (upper) hi = std::min(hi, *b);
      else lo = std::max(lo, *b);
    }
    if (lo > hi) err(ptr, "minimum is above maximum: no number fits");
  }

  Elem integer_schema(const json& s, const std::string& ptr) {
    long long lo, hi;
    bool has;
    bounds(s, ptr, true, lo, hi, has);
    return from_regex(integer_range_regex(lo, hi), "integer");
  }

  // A JSON number whose value is finite as a double, as parsers need (JSON
  // itself has no limit; "2e414" parses to inf or fails): at most 16
  // integer digits and a two-digit exponent keep |x| below 1e115.
  Elem number_elem() {
    if (number_ < 0) {
      Elem e = from_regex("-?(?:0|[1-9][0-9]{0,15})(?:\\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,2})?", "number");
      number_ = e.is_ref ? e.index : -1;
      if (number_ < 0) return e;
    }
    return {true, number_};
  }

  Elem number_schema(const json& s, const std::string& ptr) {
    long long lo, hi;
    bool has;
    bounds(s, ptr, false, lo, hi, has);
    if (!has) return number_elem();
    // Magnitude in [a, b]: integer part in [a, b-1] with any fraction, or b
    // with a zero fraction; negative values mirrored.
    const std::string frac = "(?:\\.[0-9]{1,16})?";
    auto magnitude = [&](long long a, long long b) {
      std::string out = nonneg_range(b, b) + "(?:\\.0{1,16})?";
      if (a < b) out = "(?:" + nonneg_range(a, b - 1) + frac + "|" + out + ")";
      return out;
    };
    std::vector<std::string> parts;
    if (hi >= 0) parts.push_back(magnitude(std::max(lo, 0LL), hi));
    // append, not "-" + s: GCC 12 warns falsely (-Wrestrict) on the insert that makes.
    if (lo < 0) parts.push_back(std::string("-").append(magnitude(hi < 0 ? -hi : 0, -lo)));
    if (lo == 0) parts.push_back("-0(?:\\.0{1,16})?");  // -0 is 0 in JSON
    std::string re = parts.size() == 1 ? parts[0] : "(?:" + parts[0] + "|" + parts[1] + ")";
    return from_regex(re, "number");
  }

  // Key content (canonical JSON string body) that is none of `words`: a
  // trie over their code points with a complement at each node.
  Elem key_not_in(const std::vector<std::string>& words) {
    struct Node {
      std::map<uint32_t, int> kids;
      bool end = false;
    };
    std::vector<Node> t(1);
    for (auto& w : words) {
      int n = 0;
      Cursor c;
      c.s = w;
      c.what = "JSON Schema property name";
      while (!c.done()) {
        uint32_t cp = c.code_point();
        auto it = t[n].kids.find(cp);
        if (it == t[n].kids.end()) {
          t.push_back({});
          it = t[n].kids.emplace(cp, static_cast<int>(t.size()) - 1).first;
        }
        n = it->second;
      }
      t[n].end = true;
    }
    if (char_ < 0) string_elem(0, -1);
    Elem rest = b_.group({b_.repeat({{Elem{true, char_}}}, 0, -1, "chars")}, "any-chars");
    std::vector<int> rules(t.size());
    for (size_t i = 0; i < t.size(); ++i) rules[i] = b_.add_rule("key-not-declared");
    for (size_t i = 0; i < t.size(); ++i) {
      Alts alts;
      if (!t[i].end) alts.push_back({});
      std::vector<CpRange> taken;
      for (auto& [cp, kid] : t[i].kids) {
        taken.emplace_back(cp, cp);
        for (auto& seq : json_string_chars(b_, {{cp, cp}})) {
          Seq s = seq;
          s.push_back({true, rules[kid]});
          alts.push_back(s);
        }
      }
      for (auto& seq : json_string_chars(b_, GrammarBuilder::negate(taken))) {
        Seq s = seq;
        s.push_back(rest);
        alts.push_back(s);
      }
      b_.define(rules[i], std::move(alts));
    }
    return {true, rules[0]};
  }

  Seq sep(char c) {
    Seq s = ws_;
    s.push_back(b_.byte(static_cast<uint8_t>(c)));
    append(s, ws_);
    return s;
  }

  Elem object_schema(const json& s, const std::string& ptr, int depth) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) err(ptr + "/properties", "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) err(ptr + "/required", "must be an array of strings");
      for (auto& r : s["required"]) {
        if (!r.is_string()) err(ptr + "/required", "must be an array of strings");
        if (!props.contains(r.get<std::string>()))
          err(ptr + "/required", cat("required property '", r.get<std::string>(), "' is not in properties"));
        required.insert(r.get<std::string>());
      }
    }
    // Additional properties: closed by default when properties are listed
    // (JsonOptions::open follows the spec: any further property).
    const json* addl = nullptr;
    json any = true;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!(a.is_boolean() || a.is_object())) err(ptr + "/additionalProperties", "must be a boolean or a schema");
      if (!(a.is_boolean() && !a.get<bool>())) addl = &a;
    } else if (props.empty() || open_) {
      addl = &any;
    }
    std::vector<std::string> names;
    std::vector<Seq> kv;
    for (auto& [name, sub] : props.items()) {
      names.push_back(name);
      Seq item = b_.literal(json(name).dump());
      append(item, sep(':'));
      item.push_back(schema(sub, ptr + "/properties/" + pointer_token(name), depth + 1));
      kv.push_back(std::move(item));
    }
    // Additional members after the declared ones.
    Alts tail_first{{}}, tail_next{{}};  // given no member yet / some member already
    if (addl) {
      Seq member{b_.byte('"'), names.empty() ? Elem{true, char_star()} : key_not_in(names), b_.byte('"')};
      append(member, sep(':'));
      member.push_back(schema(*addl, ptr + "/additionalProperties", depth + 1));
      Seq more = sep(',');
      append(more, member);
      Elem more_star = b_.group({b_.repeat({more}, 0, -1, "members")}, "members");
      Seq first = member;
      first.push_back(more_star);
      tail_first = {first, {}};
      tail_next = {{more_star}};
    }
    // rest[i][has_prev]: the members from property i on.
    const size_t n = names.size();
    std::vector<std::array<Elem, 2>> rest(n + 1);
    rest[n][0] = b_.group(tail_first, "members");
    rest[n][1] = b_.group(tail_next, "members");
    for (size_t i = n; i-- > 0;) {
      for (int has = 0; has < 2; ++has) {
        Seq with = has ? sep(',') : Seq{};
        append(with, kv[i]);
        with.push_back(rest[i + 1][1]);
        Alts alts{with};
        if (!required.count(names[i])) alts.push_back({rest[i + 1][has]});
        rest[i][has] = b_.group(alts, ptr.empty() ? "object" : ptr);
      }
    }
    Seq obj{b_.byte('{')};
    append(obj, ws_);
    obj.push_back(rest[0][0]);
    append(obj, ws_);
    obj.push_back(b_.byte('}'));
    return b_.group({obj}, "object");
  }

  int char_star() {
    if (char_ < 0) string_elem(0, -1);
    Elem e = b_.group({b_.repeat({{Elem{true, char_}}}, 0, -1, "chars")}, "any-chars");
    return e.index;
  }

  Elem array_schema(const json& s, const std::string& ptr, int depth) {
    int min = count_kw(s, "minItems", ptr, 0);
    int max = count_kw(s, "maxItems", ptr, -1);
    if (max >= 0 && max < min) err(ptr + "/maxItems", "is smaller than minItems: no array fits");
    std::vector<Elem> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) err(ptr + "/prefixItems", "must be an array");
      for (size_t i = 0; i < p.size(); ++i) prefix.push_back(schema(p[i], cat(ptr, "/prefixItems/", i), depth + 1));
    }
    // prefixItems entries are optional from minItems on (an array may stop
    // early); maxItems drops the entries it leaves no room for.
    const int k = max >= 0 ? std::min(static_cast<int>(prefix.size()), max) : static_cast<int>(prefix.size());
    std::optional<Elem> item;
    if (s.contains("items")) {
      const json& it = s["items"];
      if (it.is_array()) err(ptr + "/items", "an array of schemas (old tuple form) is not supported: use prefixItems");
      if (!(it.is_boolean() && !it.get<bool>())) item = schema(it, ptr + "/items", depth + 1);
    } else if (prefix.empty() || open_) {
      item = any_value();
    }
    const int emin = std::max(min - k, 0);
    const int emax = item ? (max < 0 ? -1 : max - k) : 0;
    if (!item && min > k) err(ptr + "/minItems", "needs more items than prefixItems allow while items is false");
    Seq arr{b_.byte('[')};
    append(arr, ws_);
    Seq body;
    if (k > 0) {
      // rest(i): entries i.. of the prefix, then the further items.
      Seq rest;
      if (item && emax != 0) {
        Seq next = sep(',');
        next.push_back(*item);
        rest = b_.repeat({next}, emin, emax, "items");
      }
      for (int i = k - 1; i >= 0; --i) {
        Seq seg = i ? sep(',') : Seq{};
        seg.push_back(prefix[i]);
        append(seg, rest);
        Alts alts{seg};
        if (i >= min) alts.push_back({});
        rest = {b_.group(alts, "prefix-items")};
      }
      body = rest;
    } else if (item && emax != 0) {
      Seq next = sep(',');
      next.push_back(*item);
      Seq items{*item};
      append(items, b_.repeat({next}, std::max(emin - 1, 0), emax < 0 ? -1 : emax - 1, "items"));
      if (emin == 0) body.push_back(b_.group({items, {}}, "items?"));
      else append(body, items);
    }
    append(arr, body);
    append(arr, ws_);
    arr.push_back(b_.byte(']'));
    return b_.group({arr}, "array");
  }

  const json& root_;
  GrammarBuilder b_;
  Seq ws_;
  int any_ = -1, char_ = -1, number_ = -1;
  bool open_ = false;
  std::map<std::pair<int, int>, Elem> strings_;
  std::map<std::string, int> refs_;
};

}  // namespace

Grammar compile_json_schema(std::string_view schema_text, const JsonOptions& opt) {
  json schema;
  try {
    schema = json::parse(schema_text.begin(), schema_text.end(), nullptr, true, false);
  } catch (const json::exception& e) {
    fail_as(ErrorCode::InvalidArgument, "JSON Schema: not valid JSON: ", e.what());
  }
  SchemaCompiler c(schema, opt);
  Elem top = c.schema(schema, "", 0);
  return c.finish_with(top);
}

Grammar compile_any_json(const JsonOptions& opt) {
  const nlohmann::ordered_json root = true;
  SchemaCompiler c(root, opt);
  Elem top = c.any_value();
  return c.finish_with(top);
}

}  // namespace pocket::constrain
