#!/usr/bin/env python3
"""Side-by-side decode speed of pocket binaries and drafter flags on the same prompts.

Each configuration is "BINARY|FLAGS" (FLAGS may be empty: plain decoding). For every
round and prompt file, the configurations run one after another (the machine is
shared: alternating keeps them under the same load); prints the median generated
tok/s of each. Greedy, 128 tokens, --ignore-eos, 2 threads.

  python3 bench/speculative_ab.py -m models/pocket-mini.pq4 --prompts p0.txt,p1.txt --rounds 4 \\
      "old/pocket|" "build/release/pocket|" "build/release/pocket|--draft lookup"
"""
import argparse, re, shlex, statistics, subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompts", required=True, help="comma-separated prompt files")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("configs", nargs="+", help='"BINARY|FLAGS"')
    a = ap.parse_args()
    res = {c: [] for c in a.configs}
    for _ in range(a.rounds):
        for pf in a.prompts.split(","):
            for c in a.configs:
                binary, flags = c.split("|", 1)
                cmd = [binary, "run", "-m", a.model, "-t", "2", "--temp", "0", "-n", str(a.n), "--ignore-eos", "-f", pf]
                p = subprocess.run(cmd + shlex.split(flags), capture_output=True, text=True, check=True)
                res[c].append(float(re.search(r"generated \d+ tokens ([\d.]+) tok/s", p.stderr).group(1)))
    for c in a.configs:
        print(f"| `{c}` | {statistics.median(res[c]):.1f} | {len(res[c])} runs |")


if __name__ == "__main__":
    main()
