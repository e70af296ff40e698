#!/usr/bin/env python3
"""Prompt-lookup speculative decoding on copy-heavy tasks built from ../shared/data.

Tasks (each a base-model style completion whose answer repeats the prompt):
  quote-en  a WikiText-2 paragraph, then its first sentence again: the model
            continues the quotation.
  quote-zh  a cmrc2018 paragraph, then its first clause again (zh).
  review-zh a hotel review (ChnSentiCorp), then "复述：" and its first half.
Each prompt runs with plain greedy decoding and with --draft lookup (or --spec-args;
several --spec-args run side by side: plain, then each of them, prompt by prompt),
alternately (the machine is shared: medians over prompts). Prints one
Markdown table row per task and drafter: mean accepted tokens per verify, acceptance,
median plain and speculative tok/s and the median per-prompt speed-up.

  python3 bench/speculative_lookup.py --pocket build/release/pocket -m MODEL [-n 128] [--prompts 8]
      [--spec-args "--dflash models/pocket-mini-dflash"]   # another drafter than --draft lookup
      [--spec-args "--dflash models/pocket-mini-dflash --draft-vocab 0" --spec-args "... --draft-vocab 8192"]
"""
import argparse, csv, json, os, re, shlex, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data")


MAX_CHARS = 0  # --max-chars: paragraphs cut to this length (small-context models)


def quote_en(n):
    out = []
    with open(os.path.join(DATA, "en/wikitext2/test.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("=") or len(line) < 400:
                continue
            if MAX_CHARS:
                line = line[:MAX_CHARS]
            first = line.split(" . ")[0] + " ."
            out.append(line + "\n\n" + first)
            if len(out) == n:
                break
    return out


def quote_zh(n):
    with open(os.path.join(DATA, "zh/cmrc2018_dev_squad.json"), encoding="utf-8") as f:
        d = json.load(f)
    out = []
    for art in d["data"]:
        for p in art["paragraphs"]:
            ctx = p["context"].strip()
            if len(ctx) < 200:
                continue
            first = re.split("[，。]", ctx)[0]
            out.append(ctx[:600] + "\n\n" + first)
            if len(out) == n:
                return out
    return out


def review_zh(n):
    out = []
    with open(os.path.join(DATA, "zh/ChnSentiCorp_htl_all.csv"), encoding="utf-8") as f:
        for row in csv.reader(f):
            if len(row) < 2 or len(row[1]) < 120:
                continue
            text = row[1].strip()
            out.append(text + "\n复述：" + text[: len(text) // 3])
            if len(out) == n:
                break
    return out


def run(pocket, model, prompt, n, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(prompt)
        path = f.name
    try:
        cmd = [pocket, "run", "-m", model, "-f", path, "-n", str(n), "--temp", "0", "-t", "2",
               "--ignore-eos"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    tg = float(re.search(r"generated \d+ tokens ([\d.]+) tok/s", p.stderr).group(1))
    m = re.search(r"(\d+) verified a draft \| drafted (\d+), accepted (\d+)", p.stderr)
    t = re.search(r"\| (\d+) trees\]", p.stderr)  # --draft-tree: verifies that had branches
    return tg, (int(m.group(2)), int(m.group(3)), int(m.group(1)), int(t.group(1)) if t else 0) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", default=os.path.join(ROOT, "build/release/pocket"))
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--tasks", default="quote-en,quote-zh,review-zh")
    ap.add_argument("--spec-args", action="append",
                    help="the speculative run's drafter flags (default --draft lookup); repeat to compare side by side")
    ap.add_argument("--max-chars", type=int, default=0, help="cut quote-en paragraphs to this many characters")
    a = ap.parse_args()
    global MAX_CHARS
    MAX_CHARS = a.max_chars
    tasks = {"quote-en": quote_en, "quote-zh": quote_zh, "review-zh": review_zh}
    specs = a.spec_args or ["--draft lookup"]
    print(f"drafters: {specs}")
    print("| model | drafter | task | prompts | drafted | accepted | accepted per verify | plain tok/s | speculative tok/s | speed-up (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in a.tasks.split(","):
        plain = []
        rows = [{"tok": [], "speed": [], "drafted": 0, "accepted": 0, "verifies": 0, "trees": 0} for _ in specs]
        for prompt in tasks[name](a.prompts):
            p, _ = run(a.pocket, a.model, prompt, a.n, [])
            plain.append(p)
            for spec, row in zip(specs, rows):
                extra = [] if "--draft-max" in spec else ["--draft-max", str(a.draft_max)]  # a spec may set its own
                l, st = run(a.pocket, a.model, prompt, a.n, shlex.split(spec) + extra)
                row["tok"].append(l)
                row["speed"].append(l / p)
                if st:
                    row["drafted"] += st[0]
                    row["accepted"] += st[1]
                    row["verifies"] += st[2]
                    row["trees"] += st[3]
        for spec, row in zip(specs, rows):
            d, acc = row["drafted"], row["accepted"]
            label = f"`{spec}`" + (f" ({row['trees']} of {row['verifies']} verifies trees)" if "--draft-tree" in spec else "")
            print(f"| {os.path.basename(a.model)} | {label} | {name} | {len(plain)} | {d} | {acc} "
                  f"({100 * acc / max(d, 1):.0f}%) | {acc / max(row['verifies'], 1):.2f} | "
                  f"{statistics.median(plain):.1f} | {statistics.median(row['tok']):.1f} | "
                  f"{statistics.median(row['speed']):.2f}x |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
