#!/usr/bin/env python3
"""Turns `pocket bench --ctx ... --kv KV --json` runs into the CSV that plot_kv_context.py reads.

Each argument is a pair KV:PREFIX where PREFIX.json is the JSON report and
PREFIX.err the same invocation's stderr (its "sweep run" lines carry each
measured run's decode rate). One row per measured run:
kv,context,tok_s,fill_tok_s,rss_mb.

    python3 bench/kv_context_csv.py f16:runs/1-f16 q8:runs/2-q8 > docs/kv-context.csv
"""
import json
import re
import sys

LINE = re.compile(r"sweep run \d+/\d+: decode at context (\d+) ([\d.]+) tok/s \(fill ([\d.]+) tok/s\)")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("kv,context,tok_s,fill_tok_s,rss_mb")
    for arg in sys.argv[1:]:
        kv, _, prefix = arg.partition(":")
        if not prefix:
            sys.exit(f"{arg}: expected KV:PREFIX")
        report = json.load(open(prefix + ".json"))
        rss = {p["context"]: p["rss_increase_mb"] for p in report["ctx_sweep"]}
        for line in open(prefix + ".err"):
            m = LINE.search(line)
            if m:
                c = int(m.group(1))
                print(f"{kv},{c},{m.group(2)},{m.group(3)},{rss.get(c, 0):.1f}")


if __name__ == "__main__":
    main()
