// Hugging Face's tokenizers run their pre-tokenizer regexes with Rust's regex
// crate; the JS port runs them as JS RegExps. The two differ in \s (Rust:
// Unicode White_Space, which has U+0085 and lacks U+FEFF) and in (?i:...)
// (Rust folds 's' to also match U+017F). This rewrites a pattern into a JS
// RegExp source with Rust's meaning, so the oracle answers like the real HF.
const WS = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

export function rustToJs(pattern) {
  return pattern
    .replaceAll("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'(?:[sS\\u017f]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))")
    .replaceAll("[^\\s\\p{L}\\p{N}]", `[^${WS}\\p{L}\\p{N}]`)
    .replaceAll("\\s", `[${WS}]`)
    .replaceAll("\\S", `[^${WS}]`);
}

export const GPT2_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
export const LLAMA3_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A copy of a tokenizer.json whose pre-tokenizer regex has Rust's meaning in
// JS. A GPT-2 style ByteLevel(use_regex) becomes the equivalent
// Sequence[Split(regex), ByteLevel(use_regex=false)].
export function oracleJson(tokenizerJson) {
  const t = structuredClone(tokenizerJson);
  const fix = (p) => {
    if (!p) return p;
    if (p.type === "Sequence") return { ...p, pretokenizers: p.pretokenizers.map(fix) };
    if (p.type === "Split" && p.pattern?.Regex) return { ...p, pattern: { Regex: rustToJs(p.pattern.Regex) } };
    if (p.type === "ByteLevel" && p.use_regex !== false) {
      if (p.add_prefix_space) throw new Error("oracle: ByteLevel add_prefix_space is not emulated");
      return {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: rustToJs(GPT2_REGEX) }, behavior: "Isolated", invert: false },
          { ...p, use_regex: false },
        ],
      };
    }
    return p;
  };
  t.pre_tokenizer = fix(t.pre_tokenizer);
  return t;
}
