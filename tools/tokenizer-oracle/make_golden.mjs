// Encodes tests/data/tokenizer/corpus.json with the Hugging Face JS port
// (@lenml/tokenizers) and writes golden files that Pocket's tests compare
// against without needing npm:
//   tests/data/tokenizer/golden_<name>.json = [{ids, ids_plain, decoded}, ...]
// ids:       encode(text) as HF does it (added/special tokens split out)
// ids_plain: encode(text) with no added tokens at all (Pocket's default,
//            allow_special=false: the literal text is ordinary text);
//            null when equal to ids
// decoded:   decode(ids) with special tokens kept
// Run from the repo root: node tools/tokenizer-oracle/make_golden.mjs [shared_dir]
import fs from "node:fs";
import path from "node:path";
import { TokenizerLoader } from "@lenml/tokenizers";
import { oracleJson } from "./rust_regex.mjs";

const shared = process.argv[2] ?? path.resolve("../shared");
const corpus = JSON.parse(fs.readFileSync("tests/data/tokenizer/corpus.json", "utf8"));
const readJson = (p) => JSON.parse(fs.readFileSync(p, "utf8"));

const configs = [
  { name: "qwen3", json: `${shared}/tokenizers/qwen3/tokenizer.json`, config: `${shared}/tokenizers/qwen3/tokenizer_config.json` },
  { name: "gpt2_small", json: "tests/data/tokenizer/gpt2_small/tokenizer.json" },
  { name: "llama3_small", json: "tests/data/tokenizer/llama3_small/tokenizer.json" },
];

for (const c of configs) {
  const tokenizerJSON = oracleJson(readJson(c.json));
  const tokenizerConfig = c.config ? readJson(c.config) : {};
  const full = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  const { added_tokens_decoder, additional_special_tokens, ...plainConfig } = tokenizerConfig;
  const plain = TokenizerLoader.fromPreTrained({
    tokenizerJSON: { ...tokenizerJSON, added_tokens: [] },
    tokenizerConfig: { ...plainConfig, eos_token: null, pad_token: null, bos_token: null, unk_token: null },
  });
  const rows = corpus.map((text) => {
    const ids = full.encode(text, { add_special_tokens: false });
    const ids_plain = plain.encode(text, { add_special_tokens: false });
    const decoded = ids.length ? full.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
    const same = ids_plain.length === ids.length && ids_plain.every((x, i) => x === ids[i]);
    return { ids, ids_plain: same ? null : ids_plain, decoded };
  });
  const out = `tests/data/tokenizer/golden_${c.name}.json`;
  fs.writeFileSync(out, "[\n" + rows.map((r) => JSON.stringify(r)).join(",\n") + "\n]\n");
  const nTokens = rows.reduce((a, r) => a + r.ids.length, 0);
  console.log(`${out}: ${rows.length} strings, ${nTokens} tokens`);
}
