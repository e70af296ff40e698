// Builds tests/data/tokenizer/corpus.json: hand-written edge cases plus real
// lines sampled deterministically from ../shared/data. Run from the repo root:
//   node tools/tokenizer-oracle/make_corpus.mjs [shared_dir]
import fs from "node:fs";
import zlib from "node:zlib";
import path from "node:path";

const shared = process.argv[2] ?? path.resolve("../shared");
const out = "tests/data/tokenizer/corpus.json";
const data = (p) => fs.readFileSync(path.join(shared, "data", p), "utf8");
const MAX_CHARS = 400;

// Truncate on a code point boundary.
const clip = (s) => Array.from(s).slice(0, MAX_CHARS).join("");
// Every k-th element so that `n` are taken, spread over the whole list.
const sample = (list, n) => {
  const good = list.filter((s) => s && s.trim().length > 0);
  const step = Math.max(1, Math.floor(good.length / n));
  const r = [];
  for (let i = 0; i < good.length && r.length < n; i += step) r.push(clip(good[i]));
  return r;
};
const csvField = (line, index) => {
  // Minimal CSV: quoted fields with "" escapes.
  const fields = [];
  let cur = "", q = false;
  for (let i = 0; i < line.length; ++i) {
    const c = line[i];
    if (q) {
      if (c === '"' && line[i + 1] === '"') { cur += '"'; ++i; }
      else if (c === '"') q = false;
      else cur += c;
    } else if (c === '"') q = true;
    else if (c === ",") { fields.push(cur); cur = ""; }
    else cur += c;
  }
  fields.push(cur);
  return fields[index];
};
const lines = (text) => text.split(/\r?\n/);
const jsonl = (text, key) => lines(text).filter(Boolean).map((l) => JSON.parse(l)[key]);

const hand = [
  // ASCII basics, contractions, case
  "", " ", "a", "Hello world", "Hello, world!", " Hello", "  Hello", "Hello ", "Hello  ", "hello\nworld",
  "I'm here, you're there, we've been, they'll go, she'd say, it's fine, don't",
  "I'M HERE, YOU'RE THERE, WE'VE BEEN, THEY'LL GO, SHE'D SAY, IT'S FINE, DON'T",
  "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'Re 'vE 'lL",
  "''s '''ll 'x 'sa 'llama rock'n'roll", "John's book's cover", "O'Neil's", "'", "''", "' '",
  // numbers
  "0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "-42", "+1 (555) 010-9999",
  "v1.2.3-rc4", "2024-01-31T12:34:56Z", "0x7FFF_FFFF", "1e-9", "١٢٣٤٥", "Ⅻ ⅻ ½ ¾ ²³", "１２３４５６", "第123章",
  // whitespace runs
  "a  b", "a   b", "a\tb", "a\t\tb", "a \t b", "\t\tindented", "    four spaces", "trailing   ", "\n", "\n\n", "\r\n",
  "line1\r\nline2\r\n", "a\n\n\nb", "a \n b", " \n \n ", "x\r\ny", "\r", "\r\r\n\n", "end\n", "   \n   x",
  "a\u00a0b", "a\u3000b", "\u3000\u3000全角空格", "a\u2009b\u200ac", "a\u2028b\u2029c", "\f\v", "x \u00a0 y",
  " ".repeat(40), "\n".repeat(20), "\t".repeat(10) + "x", " ".repeat(17) + "x" + " ".repeat(17),
  "a" + " ".repeat(200) + "b", "-".repeat(64), "=".repeat(33), "!!!???...", "....", "。。。。",
  // punctuation
  "Hello!!! What?? Yes...", "(parens) [brackets] {braces} <angles>", "a/b\\c|d", "@user #tag $100 50% ^_^ &amp;",
  "“smart quotes” ‘single’ «guillemets» „low“", "em—dash en–dash … ellipsis", "«Bonjour», dit-il.",
  // Chinese
  "你好", "你好，世界！", "今天天气很好，我们去公园散步吧。", "中华人民共和国成立于1949年10月1日。",
  "這是繁體中文的句子，包含「引號」與『書名號』。", "臺灣、香港、澳門", "我爱北京天安门", "一二三四五六七八九十",
  "（全角括号）【方括号】《书名号》", "标点：，。！？；：、", "价格：￥１２８．００元", "ＡＢＣ　ａｂｃ　１２３",
  "中文English混合text测试123", "使用Python 3.11和PyTorch 2.0训练模型", "iPhone 15 Pro Max 256GB 售价 9999 元",
  "请访问 https://example.com/path?q=中文&x=1 获取更多信息", "邮箱：test.user+tag@example.co.jp", "他说：“你好！”然后走了。",
  // Japanese, Korean, other scripts
  "こんにちは世界", "カタカナとひらがなと漢字", "東京は日本の首都です。", "ｶﾀｶﾅ ﾊﾝｶｸ", "안녕하세요 세계", "한국어 텍스트입니다.",
  "Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Xin chào thế giới",
  "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ", "Ærøskøbing Ångström naïve café résumé façade", "Straße ß ẞ", "İstanbul ıi",
  // NFC-sensitive input (decomposed forms, Hangul jamo, singletons, combining marks)
  "e\u0301", "cafe\u0301", "A\u030a", "\u212b", "\u2126", "o\u0308\u0304", "q\u0307\u0323", "\u1100\u1161\u11a8",
  "\u1112\u1161\u11ab\u1100\u1173\u11af", "a\u0328\u0301", "\u0344", "\u0958", "e\u0301\u0301", "\u00e9\u0301",
  "Zoe\u0308 and Chloe\u0308", "\u0041\u030a\u0301", "s\u0323\u0307", "\u1e9b\u0323", "\u0301abc",
  ">\u0338", "=\u0338 <\u0338", "\u0B47\u0B3E", "\u09C7\u09BE",
  // emoji
  "😀", "I ❤️ NY", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇨🇳🇺🇸🇯🇵", "👩🏽‍💻 coding", "🧑‍🚀🚀✨", "😀😃😄😁😆😅🤣😂",
  "emoji混合😊中文", "1️⃣2️⃣3️⃣", "☺︎ ☺️", "🫠🫡🫥", "#️⃣*️⃣",
  // special token text inside ordinary text
  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "text<|endoftext|>more text", "<|im_end|>",
  "<think>\n\n</think>\n\nAnswer", "a<|im_start|>b<|im_end|>c", "<|im_start|><|im_end|>", "<|im_start", "|im_end|>",
  "<<|im_start|>>", "<|endoftext|><|endoftext|>", " <|im_end|> ", "<tool_call>{\"name\": \"f\"}</tool_call>",
  "<|im_end|>\u0338", "x<|fim_prefix|>y<|fim_suffix|>z<|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>",
  "<s>", "</s>", "<unk>", "<|begin_of_text|>",
  // source code
  "def f(x):\n    return x * 2\n", "int main() {\n\treturn 0;\n}\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
  "const x = `template ${literal}`;", "if x != None and y >= 3:\n        pass\n\n\n", "// comment\n/* block */",
  "SELECT * FROM users WHERE id = 42;", "<div class=\"a\">&nbsp;</div>", "{\"key\": [1, 2.5, true, null]}",
  "#include <stdio.h>\n", "x = [i**2 for i in range(10) if i % 2 == 0]", "fn main() -> Result<(), Box<dyn Error>> {}",
  "    \n    \n", "\t\tif (a) {\r\n\t\t\tb();\r\n\t\t}\r\n", "path/to/file_name.ext:123:45: error: expected ';'",
  "__init__ self.__dict__ __name__", "snake_case camelCase PascalCase SCREAMING_CASE kebab-case",
];

const real = [];
const add = (name, list) => { for (const s of list) real.push(s); };
add("ChnSentiCorp", sample(lines(data("zh/ChnSentiCorp_htl_all.csv")).slice(1).map((l) => csvField(l, 1)), 120));
add("waimai", sample(lines(data("zh/waimai_10k.csv")).slice(1).map((l) => csvField(l, 1)), 80));
add("online_shopping", sample(lines(data("zh/online_shopping_10_cats.csv")).slice(1).map((l) => csvField(l, 2)), 100));
add("tnews", sample(jsonl(data("zh/fewclue/tnews_dev_few_all.json"), "sentence"), 80));
add("iflytek", sample(jsonl(data("zh/fewclue/iflytek_dev_few_all.json"), "sentence"), 60));
add("wikitext", sample(lines(data("en/wikitext2/test.txt")), 150));
add("ag_news", sample(lines(data("en/ag_news/test.csv")).map((l) => csvField(l, 1) + " " + csvField(l, 2)), 100));
const clinc = JSON.parse(data("intent/clinc150_data_full.json"));
add("clinc150", sample(clinc.test.map((x) => x[0]), 80));
add("mgsm_zh", sample(lines(data("eval/mgsm_zh.tsv")).map((l) => l.split("\t")[0]), 30));
add("mgsm_en", sample(lines(data("eval/mgsm_en.tsv")).map((l) => l.split("\t")[0]), 30));
const humaneval = lines(zlib.gunzipSync(fs.readFileSync(path.join(shared, "data/eval/HumanEval.jsonl.gz"))).toString("utf8"))
  .filter(Boolean).map((l) => JSON.parse(l));
add("humaneval", sample(humaneval.map((x) => x.prompt + x.canonical_solution), 40));
// Whole multi-line documents exercise newline handling inside long inputs.
add("wikitext_doc", [data("en/wikitext2/test.txt").slice(0, 3000)]);

const corpus = [...hand, ...real];
fs.writeFileSync(out, JSON.stringify(corpus, null, 0).replace(/","/g, '",\n"') + "\n");
console.log(`${corpus.length} strings (${hand.length} hand-written, ${real.length} from shared/data) -> ${out}`);
