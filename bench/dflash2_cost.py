#!/usr/bin/env python3
"""Draft cost per block, DFlash vs DFlash2 at the same shape.

Makes a DFlash2 draft from a DFlash folder by adding random DFlash2 weights
(conv kernels around attention and the MLP of every layer, the candidate
selector; the settings below), converts both drafts with `pocket
convert-draft` (PQ8, as deployed), then runs `pocket run --no-adaptive` with
each, alternating, and reports the median draft time per drafted block (the
stats line's draft seconds / blocks drafted). Random extra weights:
acceptance is not measured here, only cost.

usage: dflash2_cost.py POCKET MODEL DFLASH_FOLDER WORK_DIR [--runs 5] [--tokens 128]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from dflash_reference import write_safetensors  # noqa: E402

KERNEL, GROUP, RANK, TOP_K = 4, 32, 256, 16


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": "<f4", "F16": "<f2", "BF16": None}
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        if h["dtype"] == "BF16":
            a = (np.frombuffer(data[b:e], "<u2").astype(np.uint32) << 16).view("<f4")
        else:
            a = np.frombuffer(data[b:e], dtypes[h["dtype"]])
        out[name] = a.astype(np.float32).reshape(h["shape"])
    return out


def copy_draft(src, dst, cfg, t):
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(dst, "model.safetensors"), t)
    if os.path.exists(os.path.join(src, "draft_vocab.txt")):
        shutil.copy(os.path.join(src, "draft_vocab.txt"), dst)


def make_drafts(src, work, vocab):
    """work/dflash: src in f32; work/dflash2: the same plus DFlash2's weights."""
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    t = read_safetensors(os.path.join(src, "model.safetensors"))
    copy_draft(src, os.path.join(work, "dflash"), cfg, t)
    H = cfg["hidden_size"]
    rng = np.random.default_rng(0)
    for l in range(cfg["num_hidden_layers"]):
        for conv in ("attention_conv.", "mlp_conv."):
            base = np.zeros((2, KERNEL, H), np.float32)
            base[:, 0, :] = 1.0  # near identity: the draft's outputs stay in range
            t[f"layers.{l}.{conv}base_kernel"] = base
            t[f"layers.{l}.{conv}kernel_projection.weight"] = rng.normal(0, 0.01, (2 * KERNEL * (H // GROUP), H)).astype(np.float32)
    t["candidate_selector.predecessor_codebook"] = rng.normal(0, 0.1, (vocab, RANK)).astype(np.float32)
    t["candidate_selector.successor_codebook"] = rng.normal(0, 0.1, (vocab, RANK)).astype(np.float32)
    t["candidate_selector.hidden_projection.weight"] = rng.normal(0, 0.05, (RANK, H)).astype(np.float32)
    cfg["architectures"] = ["DFlash2DraftModel"]
    cfg["dflash_config"].update(conv_kernel_size=KERNEL, conv_group_size=GROUP, selector_rank=RANK, selector_top_k=TOP_K)
    copy_draft(src, os.path.join(work, "dflash2"), cfg, t)


def run(pocket, model, draft, tokens):
    out = subprocess.run([pocket, "run", "-m", model, "--dflash", draft, "--no-adaptive", "--draft-max", "7",
                          "--temp", "0", "-t", "2", "-n", str(tokens), "--ignore-eos", "-p", "Once upon a time"],
                         capture_output=True, text=True, check=True)
    out = out.stdout + out.stderr
    m = re.search(r"(\d+) verified a draft \| drafted (\d+).*draft ([\d.]+) s[^,]*, verify ([\d.]+) s", out)
    if not m:
        raise SystemExit("no speculative stats in: " + out[-400:])
    blocks, draft_s = int(m.group(1)), float(m.group(3))
    return draft_s / blocks * 1e3, blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pocket")
    ap.add_argument("model")
    ap.add_argument("dflash")
    ap.add_argument("work")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--vocab", type=int, required=True, help="the target's vocabulary size")
    a = ap.parse_args()
    make_drafts(a.dflash, a.work, a.vocab)
    files = {}
    for name in ("dflash", "dflash2"):
        files[name] = os.path.join(a.work, name + ".pocket")
        subprocess.run([a.pocket, "convert-draft", os.path.join(a.work, name), files[name]], check=True,
                       capture_output=True)
    res = {"dflash": [], "dflash2": []}
    for _ in range(a.runs):  # alternating
        for name, path in files.items():
            res[name].append(run(a.pocket, a.model, path, a.tokens)[0])
    for name, v in res.items():
        print(f"{name}: median {statistics.median(v):.3f} ms per drafted block (runs: {', '.join(f'{x:.3f}' for x in v)})")
    print(f"DFlash2 / DFlash: {statistics.median(res['dflash2']) / statistics.median(res['dflash']):.2f}x "
          f"(conv kernel {KERNEL}, group {GROUP}, selector rank {RANK}, top-{TOP_K})")


if __name__ == "__main__":
    main()
