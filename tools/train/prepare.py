#!/usr/bin/env python3
"""Tokenize the project's fixed corpus split into flat token arrays for training.

Reads CORPUS/{train,heldout}_{zh,en}.txt (one document per line, written by
tools/corpus/make_corpus.py), encodes every document with the Hugging Face
`tokenizers` library from TOKENIZER (a folder holding tokenizer.json, or the
file itself), appends the `<|endoftext|>` id after each document, and writes

  OUT/train.bin          train_zh then train_en, concatenated
  OUT/heldout_zh.bin     held-out Chinese
  OUT/heldout_en.bin     held-out English
  OUT/meta.json          dtype, vocabulary size, eos id, token and document
                         counts, sha256 of the tokenizer and of each input

Arrays are little-endian uint16 when every id fits (the pruned 64K vocabulary),
uint32 otherwise (the full 151K Qwen3 vocabulary). Deterministic: the same
inputs give the same bytes.

  python3 tools/train/prepare.py --tokenizer /work/artifacts/qwen3-64k \
      [--corpus build/corpus] [--out build/train-data]
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
from tokenizers import Tokenizer

EOS_TOKEN = "<|endoftext|>"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        # split on "\n" only: rows may hold U+2028, which str.splitlines() breaks on
        return [line for line in f.read().split("\n") if line.strip()]


def encode(tok, docs, eos_id, batch=4096):
    out = []
    for i in range(0, len(docs), batch):
        for enc in tok.encode_batch(docs[i:i + batch], add_special_tokens=False):
            out.extend(enc.ids)
            out.append(eos_id)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json, or the file")
    ap.add_argument("--corpus", default="build/corpus")
    ap.add_argument("--out", default="build/train-data")
    args = ap.parse_args()

    tok_path = args.tokenizer
    if os.path.isdir(tok_path):
        tok_path = os.path.join(tok_path, "tokenizer.json")
    tok = Tokenizer.from_file(tok_path)
    eos_id = tok.token_to_id(EOS_TOKEN)
    if eos_id is None:
        sys.exit(f"prepare.py: {tok_path} has no {EOS_TOKEN} token")
    n_vocab = tok.get_vocab_size(with_added_tokens=True)
    max_id = max(tok.get_vocab(with_added_tokens=True).values())
    dtype = np.uint16 if max_id < 65536 else np.uint32

    os.makedirs(args.out, exist_ok=True)
    meta = {
        "tokenizer": os.path.abspath(tok_path),
        "tokenizer_sha256": sha256(tok_path),
        "vocab_size": n_vocab,
        "max_token_id": max_id,
        "eos_token": EOS_TOKEN,
        "eos_id": eos_id,
        "dtype": np.dtype(dtype).name,
        "files": {},
        "inputs": {},
    }
    plan = {
        "train.bin": ["train_zh.txt", "train_en.txt"],
        "heldout_zh.bin": ["heldout_zh.txt"],
        "heldout_en.bin": ["heldout_en.txt"],
    }
    for out_name, inputs in plan.items():
        ids, docs, chars = [], 0, 0
        parts = {}
        for name in inputs:
            path = os.path.join(args.corpus, name)
            d = read_docs(path)
            meta["inputs"][name] = sha256(path)
            before = len(ids)
            ids.extend(encode(tok, d, eos_id))
            parts[name] = {"documents": len(d), "characters": sum(map(len, d)), "tokens": len(ids) - before}
            docs += len(d)
            chars += parts[name]["characters"]
        arr = np.asarray(ids, dtype=dtype)
        if arr.size and int(arr.max()) != max(ids):
            sys.exit("prepare.py: token id overflow")
        arr.astype(arr.dtype.newbyteorder("<")).tofile(os.path.join(args.out, out_name))
        meta["files"][out_name] = {"tokens": int(arr.size), "documents": docs, "characters": chars,
                                   "chars_per_token": round(chars / max(1, arr.size), 4), "parts": parts}
        print(f"{out_name}: {docs} documents, {chars} characters, {arr.size} tokens "
              f"({chars / max(1, arr.size):.3f} chars/token)")
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
