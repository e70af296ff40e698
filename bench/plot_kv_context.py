#!/usr/bin/env python3
"""Plots decode speed and resident memory against context per KV cache type (issue 14).

Reads a CSV with the columns kv,context,tok_s and optionally rss_mb (one row
per measured run; rss_mb is the resident memory over the pre-load baseline
when the run reached that context, the same for every run of one invocation).
The left panel shows the median decode rate of each kv/context pair with a
band from the lowest to the highest run; the right panel (when rss_mb is
present) the median resident memory. Writes a PNG.

    python3 bench/plot_kv_context.py docs/kv-context.csv docs/kv-context.png

`bench/kv_context_csv.py` makes the CSV from `pocket bench --ctx` runs.
Needs matplotlib (e.g. python3 -m venv build/plotenv &&
build/plotenv/bin/pip install matplotlib).
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

ORDER = ["f16", "q8", "q4"]


def read_runs(path):
    rate = defaultdict(lambda: defaultdict(list))
    rss = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            c = int(row["context"])
            rate[row["kv"]][c].append(float(row["tok_s"]))
            if row.get("rss_mb"):
                rss[row["kv"]][c].append(float(row["rss_mb"]))
    if not rate:
        sys.exit(f"{path}: no rows (expected the columns kv,context,tok_s[,rss_mb])")
    return rate, rss


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_kv_context.py RUNS.csv OUT.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate, rss = read_runs(sys.argv[1])
    kinds = sorted(rate, key=lambda k: ORDER.index(k) if k in ORDER else 9)
    panels = 2 if rss else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), dpi=120, squeeze=False)
    ax = axes[0][0]
    for kv in kinds:
        ctxs = sorted(rate[kv])
        med = [statistics.median(rate[kv][c]) for c in ctxs]
        (line,) = ax.plot(ctxs, med, marker="o", label=f"--kv {kv}")
        ax.fill_between(ctxs, [min(rate[kv][c]) for c in ctxs], [max(rate[kv][c]) for c in ctxs],
                        color=line.get_color(), alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("decode tok/s (median, band: min-max)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    if rss:
        ax = axes[0][1]
        for kv in kinds:
            ctxs = sorted(rss[kv])
            ax.plot(ctxs, [statistics.median(rss[kv][c]) for c in ctxs], marker="o", label=f"--kv {kv}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("resident memory over baseline (MB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("pocket-0.3b shape, q4 weights, 2 threads (AVX-512, shared host)")
    fig.tight_layout()
    tmp = sys.argv[2] + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()
