#!/usr/bin/env python3
"""Plain-text corpora from ../shared/data with one fixed train / held-out split.

Owns the one rule every tool that learns from the shared text uses
(vocabulary pruning counts tokens on `train`, pocket-mini trains on `train`,
the pruning report and the perplexity figures measure on `heldout`):

  * row i (0-based, in file order) of a document source is held out when
    i % 10 == 9, and is training text otherwise;
  * labelled evaluation splits never enter training: FewCLUE dev/test,
    SMP2017 develop/test, CLINC150 val/test/oos, SNIPS/ATIS valid/test,
    AG News (a test split), MGSM, IFEval and HumanEval are not read at all;
  * WikiText-2 test.txt is English held-out text, valid.txt training text.

Writes OUT/{train,heldout}_{zh,en}.txt, one document per line (a
document's own line breaks become spaces), and OUT/manifest.json with the
sources, row and character counts. Deterministic: the same input gives the
same bytes.

  python3 tools/corpus/make_corpus.py [--shared ../shared] [--out build/corpus]
"""
import argparse
import csv
import json
import os
import sys

csv.field_size_limit(1 << 30)


def held_out(i):
    return i % 10 == 9


def clean(text):
    text = text.replace("\ufeff", "").replace("\r\n", "\n").replace("\r", "\n")
    return " ".join(part.strip() for part in text.split("\n") if part.strip())


def csv_column(path, column):
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            yield row[column]


def jsonl_field(path, field):
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):  # not splitlines(): U+2028 occurs in rows
            if line.strip():
                yield json.loads(line)[field]


def cmrc_contexts(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for article in data["data"]:
        for para in article["paragraphs"]:
            yield para["context"]


def lines(path):
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            yield line


def intent_train_texts(shared):
    with open(os.path.join(shared, "data/intent/clinc150_data_full.json"), encoding="utf-8") as f:
        for text, _ in json.load(f)["train"]:
            yield text
    for name in ("snips", "atis"):
        yield from lines(os.path.join(shared, f"data/intent/{name}/train/seq.in"))


def sources(shared):
    """(language, name, documents, split rule) for every source read."""
    d = lambda p: os.path.join(shared, "data", p)
    return [
        ("zh", "online_shopping_10_cats", lambda: csv_column(d("zh/online_shopping_10_cats.csv"), "review"), "mod10"),
        ("zh", "waimai_10k", lambda: csv_column(d("zh/waimai_10k.csv"), "review"), "mod10"),
        ("zh", "ChnSentiCorp_htl_all", lambda: csv_column(d("zh/ChnSentiCorp_htl_all.csv"), "review"), "mod10"),
        ("zh", "eprstmt_unlabeled", lambda: jsonl_field(d("zh/fewclue/eprstmt_unlabeled.json"), "sentence"), "mod10"),
        ("zh", "tnews_unlabeled", lambda: jsonl_field(d("zh/fewclue/tnews_unlabeled.json"), "sentence"), "mod10"),
        ("zh", "iflytek_train", lambda: jsonl_field(d("zh/fewclue/iflytek_train_few_all.json"), "sentence"), "mod10"),
        ("zh", "cmrc2018_contexts", lambda: cmrc_contexts(d("zh/cmrc2018_dev_squad.json")), "mod10"),
        ("en", "wikitext2_valid", lambda: lines(d("en/wikitext2/valid.txt")), "train"),
        ("en", "wikitext2_test", lambda: lines(d("en/wikitext2/test.txt")), "heldout"),
        ("en", "intent_train_splits", lambda: intent_train_texts(shared), "mod10"),
    ]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.normpath(os.path.join(here, "../../../shared")))
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, "../../build/corpus")))
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.shared, "data")):
        sys.exit(f"make_corpus: no data folder under {args.shared}")
    os.makedirs(args.out, exist_ok=True)
    outs = {}
    manifest = {"rule": "row i held out when i % 10 == 9; wikitext2 test held out, valid train", "sources": []}
    for lang in ("zh", "en"):
        for split in ("train", "heldout"):
            outs[(lang, split)] = []
    for lang, name, docs, rule in sources(args.shared):
        counts = {"train": [0, 0], "heldout": [0, 0]}
        for i, doc in enumerate(docs()):
            text = clean(doc)
            if not text:
                continue
            split = rule if rule != "mod10" else ("heldout" if held_out(i) else "train")
            outs[(lang, split)].append(text)
            counts[split][0] += 1
            counts[split][1] += len(text)
        manifest["sources"].append({"lang": lang, "name": name, "rows": {k: v[0] for k, v in counts.items()},
                                    "chars": {k: v[1] for k, v in counts.items()}})
    for (lang, split), docs in outs.items():
        path = os.path.join(args.out, f"{split}_{lang}.txt")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for doc in docs:
                f.write(doc + "\n")
        os.replace(tmp, path)
        print(f"{path}: {len(docs)} documents, {sum(map(len, docs))} characters")
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
