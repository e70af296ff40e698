// Trains two tiny byte-level BPE tokenizers (merges learned from the test
// corpus) and writes them as Hugging Face tokenizer.json files, to test
// Pocket on configurations other than Qwen's:
//   gpt2_small:   ByteLevel(use_regex=true) with the GPT-2 regex, no normalizer
//   llama3_small: Split(Llama-3 regex) + ByteLevel, NFC, ignore_merges, added tokens
// Run from the repo root: node tools/tokenizer-oracle/train_small.mjs
import fs from "node:fs";
import { rustToJs, GPT2_REGEX, LLAMA3_REGEX } from "./rust_regex.mjs";

const corpus = JSON.parse(fs.readFileSync("tests/data/tokenizer/corpus.json", "utf8"));

// GPT-2's byte -> unicode map.
const byteToChar = (() => {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const m = [];
  let next = 0x100;
  for (let b = 0; b < 256; ++b) m.push(String.fromCodePoint(printable(b) ? b : next++));
  return m;
})();
const mapBytes = (s) => Array.from(Buffer.from(s, "utf8"), (b) => byteToChar[b]);

function train(regex, nMerges) {
  const re = new RegExp(rustToJs(regex), "gu");
  const words = new Map();  // word (joined symbols) -> count
  for (const text of corpus) for (const m of text.normalize("NFC").matchAll(re)) {
    const w = mapBytes(m[0]).join("\u0000");
    words.set(w, (words.get(w) ?? 0) + 1);
  }
  let seqs = [...words].map(([w, c]) => [w.split("\u0000"), c]);
  const merges = [];
  for (let k = 0; k < nMerges; ++k) {
    const counts = new Map();
    for (const [s, c] of seqs)
      for (let i = 0; i + 1 < s.length; ++i) {
        const key = s[i] + "\u0000" + s[i + 1];
        counts.set(key, (counts.get(key) ?? 0) + c);
      }
    let best = null, bestCount = 0;
    for (const [key, c] of counts) if (c > bestCount || (c === bestCount && key < best)) { best = key; bestCount = c; }
    if (!best || bestCount < 2) break;
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    seqs = seqs.map(([s, c]) => {
      const r = [];
      for (let i = 0; i < s.length; ++i) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) { r.push(a + b); ++i; } else r.push(s[i]);
      }
      return [r, c];
    });
  }
  const vocab = {};
  byteToChar.forEach((ch, i) => { vocab[ch] = i; });
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  return { vocab, merges };
}

function write(dir, json) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(`${dir}/tokenizer.json`, JSON.stringify(json, null, 1) + "\n");
  console.log(`${dir}: ${Object.keys(json.model.vocab).length} tokens, ${json.model.merges.length} merges`);
}

const added = (id, content, special) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special });

{
  const { vocab, merges } = train(GPT2_REGEX, 700);
  const n = Object.keys(vocab).length;
  write("tests/data/tokenizer/gpt2_small", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(n, "<|endoftext|>", true)],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    // "a b" strings, as older files spell merges.
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
      fuse_unk: false, byte_fallback: false, vocab, merges: merges.map(([a, b]) => `${a} ${b}`) },
  });
}
{
  const { vocab, merges } = train(LLAMA3_REGEX, 900);
  const n = Object.keys(vocab).length;
  write("tests/data/tokenizer/llama3_small", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(n, "<|begin_of_text|>", true), added(n + 1, "<|eot_id|>", true), added(n + 2, "<tool>", false)],
    normalizer: { type: "Sequence", normalizers: [{ type: "NFC" }] },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: LLAMA3_REGEX }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
  });
}
