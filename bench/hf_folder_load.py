#!/usr/bin/env python3
"""Load-to-first-token of a Hugging Face folder (issue 10's "Load" goal).

Writes (once) a Qwen3 folder of the pocket-0.3b shape with random f16 weights:
config.json, model.safetensors, and the tokenizer files of models/pocket-mini
(its 64K pruned Qwen3 vocabulary). Then times whole processes of

    pocket run -m FOLDER -p PROMPT -n 1 -t THREADS --temp 0

(process start, mapping and checking the folder, loading tokenizer.json,
encoding, the prompt's forward and the first token, exit): one warm-up (it
also warms the page cache), then --runs timed runs; prints the median, min
and max wall time, and the prompt-processing time Pocket reports itself.

  python3 bench/hf_folder_load.py [--pocket build/release/pocket] [--dir DIR] [--runs 7]

Needs numpy and safetensors (build/oracle-venv has both).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import save_file

SHAPE = dict(hidden=1024, ffn=3072, layers=15, heads=16, kv_heads=8, head_dim=128)


def write_folder(out, tokenizer_dir, seed=1):
    tok = json.load(open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8"))
    vocab = len(tok["model"]["vocab"]) + len(tok.get("added_tokens", []))
    vocab = (vocab + 63) // 64 * 64
    h, f, L = SHAPE["hidden"], SHAPE["ffn"], SHAPE["layers"]
    q, kv = SHAPE["heads"] * SHAPE["head_dim"], SHAPE["kv_heads"] * SHAPE["head_dim"]
    rng = np.random.default_rng(seed)

    def w(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16)

    t = {"model.embed_tokens.weight": w(vocab, h), "model.norm.weight": np.ones(h, np.float16)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(h, np.float16)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, np.float16)
        t[p + "self_attn.q_proj.weight"] = w(q, h)
        t[p + "self_attn.k_proj.weight"] = w(kv, h)
        t[p + "self_attn.v_proj.weight"] = w(kv, h)
        t[p + "self_attn.o_proj.weight"] = w(h, q)
        t[p + "self_attn.q_norm.weight"] = np.ones(SHAPE["head_dim"], np.float16)
        t[p + "self_attn.k_norm.weight"] = np.ones(SHAPE["head_dim"], np.float16)
        t[p + "mlp.gate_proj.weight"] = w(f, h)
        t[p + "mlp.up_proj.weight"] = w(f, h)
        t[p + "mlp.down_proj.weight"] = w(h, f)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    save_file(t, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "float16",
        "hidden_size": h, "intermediate_size": f, "num_hidden_layers": L,
        "num_attention_heads": SHAPE["heads"], "num_key_value_heads": SHAPE["kv_heads"],
        "head_dim": SHAPE["head_dim"], "vocab_size": vocab, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
        "hidden_act": "silu", "attention_bias": False,
    }
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(tokenizer_dir, name)):
            shutil.copy(os.path.join(tokenizer_dir, name), tmp)
    os.replace(tmp, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", default="build/release/pocket")
    ap.add_argument("--dir", default="build/bench/pocket-0.3b-hf")
    ap.add_argument("--tokenizer", default="models/pocket-mini")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--prompt", default="Tell me about the weather in Hangzhou today.")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        t0 = time.time()
        write_folder(a.dir, a.tokenizer)
        print(f"wrote {a.dir} in {time.time() - t0:.1f} s", file=sys.stderr)
    cmd = [a.pocket, "run", "-m", a.dir, "-p", a.prompt, "-n", "1", "-t", str(a.threads), "--temp", "0"]
    walls, prompt_ms = [], []
    for i in range(a.runs + 1):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
        m = re.search(r"prompt (\d+) tokens .*?([\d.]+) tok/s", r.stderr)
        if i == 0:
            continue  # warm-up (and the page cache)
        walls.append(wall * 1e3)
        if m:
            prompt_ms.append(int(m.group(1)) / float(m.group(2)) * 1e3)
    print(f"load to first token (whole process, {a.runs} runs after a warm-up): median {statistics.median(walls):.1f} ms "
          f"[{min(walls):.1f}, {max(walls):.1f}]")
    if prompt_ms:
        print(f"  of it the prompt's forward (Pocket's report): median {statistics.median(prompt_ms):.1f} ms")


if __name__ == "__main__":
    main()
