#!/usr/bin/env python3
"""transformers' float32 forward of the pocket-mini folder as a golden for Pocket.

Loads FOLDER (export.py's Hugging Face folder: f16 weights) as Qwen3ForCausalLM
in float32 with eager attention, tokenizes each prompt with the folder's
tokenizer.json (Hugging Face `tokenizers`, no special tokens added), and writes
for every position the top-k [[id, logit], ...] and the full-vocabulary max
and log-sum-exp, in the layout tests/model/test_gemma3.cpp reads:

  {"transformers": ..., "torch": ..., "folder_sha256": {...}, "tolerance": ...,
   "cases": [{"prompt": ..., "ids": [...], "positions": [...], "top": [...],
              "lse": [...]}]}

Expected agreement (f16 weights, identical on both sides): Pocket's float
reference forward (ReferenceModel: f32 weights, double accumulation) within 2e-3
of every listed logit (logits here are O(10); only summation order differs),
the same argmax where the top two differ by more than twice that, and the
log-sum-exp within 2e-3. Pocket's fast forward quantizes activations to int8
(as the Gemma 3 test notes), so there expect differences of order 0.1-1 and
compare it with a looser bound. The INT4 file against the folder is a
quantization-quality question: `pocket eval -m INT4 --ref FOLDER -f TEXT`.

  python3 tools/train/golden_logits.py FOLDER OUT.json [--top-k 8]
"""
import argparse
import hashlib
import json
import os

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer

PROMPTS = [
    "这家酒店的服务很好，房间也很干净",
    "今天的新闻：",
    "The history of the city began in",
    "In 1998, the team won",
    "wake me up at 7 am tomorrow",
    "手机电池不耐用，客服态度也不好。<|endoftext|>外卖送得很快",
]
TOLERANCE = 2e-3


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--top-k", type=int, default=8)
    a = ap.parse_args()
    torch.set_num_threads(2)
    tok = Tokenizer.from_file(os.path.join(a.folder, "tokenizer.json"))
    model = transformers.AutoModelForCausalLM.from_pretrained(a.folder, attn_implementation="eager").float().eval()
    sdpa = transformers.AutoModelForCausalLM.from_pretrained(a.folder, attn_implementation="sdpa").float().eval()
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "folder_sha256": {n: sha(os.path.join(a.folder, n)) for n in sorted(os.listdir(a.folder))
                             if n.endswith((".safetensors", ".json"))},
           "tolerance": TOLERANCE, "cases": []}
    worst = 0.0
    for prompt in PROMPTS:
        ids = tok.encode(prompt, add_special_tokens=False).ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double().numpy()
            other = sdpa(torch.tensor([ids])).logits[0].double().numpy()
        worst = max(worst, float(np.abs(logits - other).max()))
        top, lse = [], []
        for p in range(len(ids)):
            order = np.argsort(-logits[p], kind="stable")[: a.top_k]
            top.append([[int(i), float(logits[p][i])] for i in order])
            m = logits[p].max()
            lse.append(float(m + np.log(np.exp(logits[p] - m).sum())))
        out["cases"].append({"prompt": prompt, "ids": ids, "positions": list(range(len(ids))), "top": top,
                             "lse": lse})
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    os.replace(a.out + ".tmp", a.out)
    print(f"{a.out}: {len(out['cases'])} prompts; eager vs sdpa in transformers: max |logit diff| {worst:.2e} "
          f"(tolerance for Pocket {TOLERANCE})")


if __name__ == "__main__":
    main()
