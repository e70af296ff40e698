#!/usr/bin/env python3
"""Loss curve of a training run from its log.json, as a PNG.

Left: training loss (per logged step) and held-out loss (zh, en) of the target
against tokens seen. Right: the plain draft's soft cross-entropy and the DFlash
draft's block cross-entropy against their steps (when present).

  python3 tools/train/plot.py build/train-out/log.json docs/pocket-mini-loss.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(log_path, png_path):
    with open(log_path, encoding="utf-8") as f:
        log = json.load(f)
    t = log["target"]
    drafts = [k for k in ("draft", "dflash") if k in log]
    fig, axes = plt.subplots(1, 2 if drafts else 1, figsize=(11 if drafts else 6.5, 4.2), squeeze=False)
    ax = axes[0][0]
    ax.plot([r["tokens"] / 1e6 for r in t["train"]], [r["loss"] for r in t["train"]], lw=1, label="train")
    for lang, style in (("zh", "o-"), ("en", "s-")):
        ax.plot([r["tokens"] / 1e6 for r in t["heldout"]], [r[lang]["loss"] for r in t["heldout"]], style, ms=3,
                label=f"held-out {lang}")
    ax.set_xlabel("tokens seen (M)")
    ax.set_ylabel("cross-entropy (nats/token)")
    cfg = t["config"]
    ax.set_title(f"pocket-mini target: {t['parameters'] / 1e6:.1f}M params, {cfg['num_hidden_layers']} layers, "
                 f"hidden {cfg['hidden_size']}", fontsize=9)
    ax.set_ylim(top=min(12, max(r["loss"] for r in t["train"]) + 0.5))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if drafts:
        ax = axes[0][1]
        if "draft" in log:
            d = log["draft"]
            ax.plot([r["step"] for r in d["train"]], [r["soft_ce"] for r in d["train"]],
                    label=f"plain draft ({d['layers']} layer) soft CE")
        if "dflash" in log:
            d = log["dflash"]
            ax.plot([r["step"] for r in d["train"]], [r["block_ce"] for r in d["train"]],
                    label=f"DFlash draft ({d['layers']} layer, block {d['block_size']}) block CE")
        ax.set_xlabel("draft step")
        ax.set_ylabel("cross-entropy vs target")
        ax.set_title("drafts, distilled from the target", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(png_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
