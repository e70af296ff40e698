#!/usr/bin/env python3
"""Prints the markdown accuracy table from the train-head JSON reports that
bench/heads/accuracy_table.sh wrote (NAME.hidden.json beside NAME.tokens.json)."""
import glob
import json
import os
import sys

MODELS = {"stories": "stories260K (real, en)", "random03b": "random pocket-0.3b + Qwen3 tok.", "mini": "pocket-mini (real, zh/en)",
          "gemma": "Gemma 3 270M (real, Q4_K_M)"}


def row(name, kind, r):
    test = next((s for s in r["splits"] if s["split"] == "test"), r["splits"][-1])
    model, data = name.split("-", 1)
    feats = "hidden (mean)" if kind == "hidden" else "bag of tokens"
    oos = ""
    if "oos_recall" in test:
        oos = f"{test['routed_in_scope_accuracy']:.3f} / {test['oos_recall']:.3f}"
    n = {s["split"]: s["examples"] for s in r["splits"]}
    kb = r["head_bytes"] / 1024
    return (f"| {MODELS.get(model, model)} | {data} | {feats} | {n.get('train', 0)}/{n.get('val', 0)}/{n.get('test', 0)} "
            f"| {test['accuracy']:.3f} | {test['macro_f1']:.3f} | {test['ece']:.3f} | {oos} "
            f"| {r['feature_seconds']:.0f} s | {r['train_seconds']:.1f} s | {kb:.0f} KiB |")


def main(folder):
    print("| features from | data set | features | train/val/test | test acc. | macro-F1 | ECE | routed in-scope acc. / oos recall "
          "| feature time | training time | head size |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(folder, "*.hidden.json"))):
        name = os.path.basename(path)[:-len(".hidden.json")]
        for kind in ("hidden", "tokens"):
            p = os.path.join(folder, f"{name}.{kind}.json")
            if os.path.exists(p):
                print(row(name, kind, json.load(open(p))))


if __name__ == "__main__":
    main(sys.argv[1])
