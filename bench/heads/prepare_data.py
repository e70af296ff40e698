#!/usr/bin/env python3
"""Turns the shared data sets into train/val/test JSONL files ({"text","label"}) for
`pocket train-head` (docs/decision_head.md). Sets already in JSONL/CSV/TSV with a
split column are read by pocket directly; this only converts CLINC150 (a dict of
splits), SNIPS/ATIS (parallel label/seq.in files), and splits AG News and the
Chinese review sets (single files) with a fixed seed.

usage: prepare_data.py SHARED_DATA_DIR OUT_DIR
"""
import csv
import json
import os
import random
import sys


def write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for text, label in rows:
            f.write(json.dumps({"text": text, "label": str(label)}, ensure_ascii=False) + "\n")


def split3(rows, n_val, n_test, seed=1):
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows[n_val + n_test:], rows[:n_val], rows[n_val:n_val + n_test]


def main(data, out):
    os.makedirs(out, exist_ok=True)
    d = json.load(open(os.path.join(data, "intent/clinc150_data_full.json"), encoding="utf-8"))
    for split in ("train", "val", "test"):
        write(os.path.join(out, f"clinc150_{split}.jsonl"), d[split] + d["oos_" + split])
    for name in ("snips", "atis"):
        for split, to in (("train", "train"), ("valid", "val"), ("test", "test")):
            base = os.path.join(data, "intent", name, split)
            labels = open(os.path.join(base, "label"), encoding="utf-8").read().split("\n")
            texts = open(os.path.join(base, "seq.in"), encoding="utf-8").read().split("\n")
            rows = [(t.strip(), l.strip()) for t, l in zip(texts, labels) if t.strip()]
            write(os.path.join(out, f"{name}_{to}.jsonl"), rows)
    names = {"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"}
    with open(os.path.join(data, "en/ag_news/test.csv"), encoding="utf-8") as f:
        rows = [(r[1] + ". " + r[2].replace("\\", " "), names[r[0]]) for r in csv.reader(f)]
    for part, rows_ in zip(("train", "val", "test"), split3(rows, 1000, 1600)):
        write(os.path.join(out, f"agnews_{part}.jsonl"), rows_)
    with open(os.path.join(data, "zh/online_shopping_10_cats.csv"), encoding="utf-8-sig") as f:
        rows = [(r["review"].lstrip("\ufeff"), r["cat"]) for r in csv.DictReader(f) if r["review"].strip()]
    for part, rows_ in zip(("train", "val", "test"), split3(rows, 2000, 4000)):
        write(os.path.join(out, f"shopping_{part}.jsonl"), rows_)
    with open(os.path.join(data, "zh/waimai_10k.csv"), encoding="utf-8-sig") as f:
        rows = [(r["review"], r["label"]) for r in csv.DictReader(f) if r["review"].strip()]
    for part, rows_ in zip(("train", "val", "test"), split3(rows, 1000, 2000)):
        write(os.path.join(out, f"waimai_{part}.jsonl"), rows_)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
