#!/usr/bin/env python3
"""Encodes test strings with Hugging Face `tokenizers` (the Rust library) and
writes the ids as a case file for the TokenizerLive gtest.

The strings are the committed corpus (tests/data/tokenizer/corpus.json) plus
freshly generated random ones: mixed scripts, emoji ZWJ sequences, Chinese
punctuation, long runs of spaces/newlines/digits, random code points from
every plane, and special tokens glued into text. The seed is printed and
stored in the file so a failure can be replayed with --seed.

usage: tokenizer_cases.py TOKENIZER_JSON CORPUS_JSON OUT_JSON [--random N] [--seed S] [--text FILE...]
       tokenizer_cases.py TOKENIZER_JSON CORPUS_JSON GOLDEN_JSON --golden
--text adds every line (one document per line, split on \n only) of UTF-8
text files, e.g. the held-out corpus for the pruned vocabulary's parity test.
The second form rewrites a committed golden file (corpus only, the format of
tests/data/tokenizer/golden_*.json: ids_plain null where equal to ids).
"""
import argparse
import json
import os
import random
import sys
import time

import tokenizers

PIECES = [
    "Hello", " world", "你好", "，", "。", "！", "？", "、", "；", "：", "“", "”", "《", "》", "（", "）", "【", "】",
    "——", "……", "中文", "模型", "手机", "的", "了", "是", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", " \n ",
    "123", "4567890", "3.14", "1,000", "'s", "'t", "'re", "'LL", " don't", "ÀÉÎõü", "naïve", "Ελληνικά", "русский",
    "العربية", "עברית", "हिन्दी", "ไทย", "日本語", "カタカナ", "한국어", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇨🇳",
    "e\u0301", "Å", "\u00a0", "\u3000", "\u200b", "\ufeff", "ﬁ", "①", "Ⅻ", "½", "$", "%", "#", "@", "<", ">",
    "```", "{\"a\": 1}", "http://x.y/z?q=1", "foo_bar", "CamelCase", "ALLCAPS", "-", "--", "...",
]


def random_text(rng, specials):
    kind = rng.random()
    if kind < 0.15:  # long runs
        unit = rng.choice([" ", "\n", "9", "a", "中", "!", "\t", " \n", "😀"])
        return unit * rng.randint(10, 400)
    if kind < 0.3:  # random code points from every plane (no surrogates)
        out = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            cp = rng.randint(0x20, 0x7E) if r < 0.3 else rng.randint(0x80, 0xFFFF) if r < 0.8 else rng.randint(0x10000, 0x10FFFF)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0x41
            out.append(chr(cp))
        return "".join(out)
    parts = [rng.choice(PIECES) for _ in range(rng.randint(1, 16))]
    if specials and rng.random() < 0.2:
        parts.insert(rng.randint(0, len(parts)), rng.choice(specials))
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer")
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--random", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--golden", action="store_true")
    ap.add_argument("--text", nargs="+", default=[])
    a = ap.parse_args()
    if a.golden:
        a.random = 0
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    tok = tokenizers.Tokenizer.from_file(a.tokenizer)
    specials = [t.content for t in tok.get_added_tokens_decoder().values() if t.special]
    with open(a.corpus, encoding="utf-8") as f:
        texts = json.load(f)
    for path in a.text:
        with open(path, encoding="utf-8", newline="") as f:
            texts += [line for line in f.read().split("\n") if line]
    texts += [random_text(rng, specials) for _ in range(a.random)]
    cases = []
    for t in texts:
        tok.encode_special_tokens = False
        ids = tok.encode(t, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        plain = tok.encode(t, add_special_tokens=False).ids
        cases.append({"text": t, "ids": ids, "ids_plain": plain, "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        if a.golden:
            f.write("[\n")
            for i, c in enumerate(cases):
                row = {"ids": c["ids"], "ids_plain": None if c["ids_plain"] == c["ids"] else c["ids_plain"],
                       "decoded": c["decoded"]}
                f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + (",\n" if i + 1 < len(cases) else "\n"))
            f.write("]\n")
        else:
            json.dump({"tokenizers": tokenizers.__version__, "seed": seed, "cases": cases}, f, ensure_ascii=False)
    os.replace(a.out + ".tmp", a.out)
    print(f"{a.out}: {len(cases)} cases ({a.random} random, seed {seed}), tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
