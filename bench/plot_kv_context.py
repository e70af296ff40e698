#!/usr/bin/env python3
"""Plots decode speed against context per KV cache type (issue 14).

Reads a CSV with the columns kv,context,tok_s (one row per measured run;
the plot shows the median of each kv/context pair, and the spread as a
band from the lowest to the highest run) and writes a PNG.

    python3 bench/plot_kv_context.py docs/kv-context.csv docs/kv-context.png

Needs matplotlib (e.g. python3 -m venv build/plotenv &&
build/plotenv/bin/pip install matplotlib).
"""
import csv
import statistics
import sys
from collections import defaultdict


def read_runs(path):
    runs = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            runs[row["kv"]][int(row["context"])].append(float(row["tok_s"]))
    if not runs:
        sys.exit(f"{path}: no rows (expected the columns kv,context,tok_s)")
    return runs


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_kv_context.py RUNS.csv OUT.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = read_runs(sys.argv[1])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for kv in sorted(runs, key=lambda k: ["f16", "q8", "q4"].index(k) if k in ("f16", "q8", "q4") else 9):
        ctxs = sorted(runs[kv])
        med = [statistics.median(runs[kv][c]) for c in ctxs]
        lo = [min(runs[kv][c]) for c in ctxs]
        hi = [max(runs[kv][c]) for c in ctxs]
        (line,) = ax.plot(ctxs, med, marker="o", label=f"--kv {kv}")
        ax.fill_between(ctxs, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("decode tok/s (median, band: min-max)")
    ax.set_title("pocket-0.3b shape, q4 weights, 2 threads (AVX-512, shared host)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = sys.argv[2] + ".tmp.png"
    fig.savefig(tmp)
    import os

    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()
