#!/usr/bin/env python3
"""Structured output on a real model (issues 12, 17, 18): ~20 one-shot extraction
prompts from ../shared/data (10 online_shopping_10_cats reviews -> review_card.json,
10 SNIPS test utterances -> intent_slots.json), each decoded greedily free and
constrained (`pocket run --json-schema`), alternating. Reports the share of free
outputs whose first line is JSON valid for the schema (jsonschema), the same for
the constrained outputs (must be 100%), and the decode-speed ratio constrained /
free (medians of per-prompt tok/s from pocket run's stats line).

  python3 bench/structured/structured_real.py -m MODEL [--pocket build/release/pocket] [--n 10]
Needs the `jsonschema` package (the oracle venv has it)."""
import argparse, csv, json, os, random, re, statistics, subprocess, sys
import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(ROOT, "..", "shared", "data")

ZH = ("从评论中提取商品卡片（JSON）。\n评论：这本书内容很好，印刷清晰，值得一读。\nJSON:\n"
      '{"category":"书籍","sentiment":"positive","keywords":["内容","印刷"]}\n\n评论：{text}\nJSON:\n')
EN = ("Extract the intent and slots as JSON.\nText: play yesterday by the beatles\nJSON:\n"
      '{"intent":"PlayMusic","slots":{"artist":"the beatles","object_name":"yesterday"}}\n\nText: {text}\nJSON:\n')


def prompts(n):
    rng = random.Random(1)
    with open(os.path.join(SHARED, "zh", "online_shopping_10_cats.csv"), encoding="utf-8-sig") as f:
        rows = [r for r in csv.DictReader(f) if 8 <= len(r["review"]) <= 80]
    reviews = rng.sample(rows, n)
    with open(os.path.join(SHARED, "intent", "snips", "test", "seq.in"), encoding="utf-8") as f:
        utts = [l.strip() for l in f if l.strip()]
    utts = utts[:: max(1, len(utts) // n)][:n]
    out = [("zh", ZH.replace("{text}", r["review"].strip()), "review_card.json") for r in reviews]
    out += [("en", EN.replace("{text}", u), "intent_slots.json") for u in utts]
    return out


def run(pocket, model, prompt, schema, ntok, threads):
    cmd = [pocket, "run", "-m", model, "-p", prompt, "-n", str(ntok), "--temp", "0", "-t", str(threads)]
    if schema:
        cmd += ["--json-schema", schema]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = re.search(r"generated (\d+) tokens ([\d.]+) tok/s", p.stderr)
    text = p.stdout[len(prompt):] if p.stdout.startswith(prompt) else p.stdout  # free runs echo the prompt
    return text, int(m.group(1)), float(m.group(2))


def valid(text, schema):
    line = text.strip().split("\n")[0].strip()
    try:
        jsonschema.validate(json.loads(line), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--pocket", default=os.path.join(ROOT, "build", "release", "pocket"))
    ap.add_argument("--n", type=int, default=10, help="prompts per language")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--show", action="store_true")
    a = ap.parse_args()
    res = {}
    for i, (lang, prompt, sname) in enumerate(prompts(a.n)):
        spath = os.path.join(HERE, sname)
        schema = json.load(open(spath, encoding="utf-8"))
        order = ["free", "constrained"] if i % 2 == 0 else ["constrained", "free"]
        row = {}
        for mode in order:
            text, ntok, tps = run(a.pocket, a.model, prompt, spath if mode == "constrained" else None, a.tokens, a.threads)
            row[mode] = (valid(text, schema), tps, ntok, text)
        res.setdefault(lang, []).append(row)
        if a.show:
            print(lang, "FREE:", repr(row["free"][3][:120]), "\n   CONSTRAINED:", repr(row["constrained"][3][:120]), file=sys.stderr)
    summary = {}
    for lang, rows in res.items():
        summary[lang] = {
            "prompts": len(rows),
            "free_valid": sum(r["free"][0] for r in rows),
            "constrained_valid": sum(r["constrained"][0] for r in rows),
            "free_tok_s": statistics.median(r["free"][1] for r in rows),
            "constrained_tok_s": statistics.median(r["constrained"][1] for r in rows),
            "ratio_median": statistics.median(r["constrained"][1] / r["free"][1] for r in rows),
            "constrained_tokens_mean": statistics.mean(r["constrained"][2] for r in rows),
        }
    print(json.dumps({"model": a.model, "load": open("/proc/loadavg").read().split()[:3], "sets": summary}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
