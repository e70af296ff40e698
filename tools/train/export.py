#!/usr/bin/env python3
"""Turn a training run's pack (train.py / gpu_run.sh output) into the shipped files.

  OUT/pocket-mini/          Hugging Face folder via save_pretrained: config.json,
                            generation_config.json, model.safetensors (f16),
                            tokenizer.json, tokenizer_config.json
  OUT/pocket-mini-draft/    the plain draft as its own Hugging Face folder (the
                            target's embedding copied in: it was shared and frozen)
  OUT/pocket-mini-dflash/   the DFlash block draft in z-lab's format:
                            model.safetensors + config.json (no embedding, no head)
  OUT/pocket-mini.gguf      f16 GGUF written with the `gguf` package, with the
                            keys and tensor names llama.cpp's converter uses for
                            qwen3 (--gguf)
  then:  pocket quantize OUT/pocket-mini OUT/pocket-mini.pq4 --weights q4   (INT4)

--check reloads the folder with transformers (f32), compares its logits with the
packed weights' forward, and greedy-generates a few tokens from a Chinese and an
English prompt.

  python3 tools/train/export.py --pack build/train-out --tokenizer DIR --out build/pocket-mini [--gguf] [--check]
"""
import argparse
import copy
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import packing  # noqa: E402
from dflash_draft import clean_config  # noqa: E402

from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def build_model(cfg_dict, tensors, embed=None):
    cfg = Qwen3Config(**{k: v for k, v in cfg_dict.items() if k not in ("transformers_version",)})
    cfg.architectures = ["Qwen3ForCausalLM"]
    model = Qwen3ForCausalLM(cfg).float()
    sd = {k: v.float() for k, v in tensors.items()}
    if embed is not None:
        sd["model.embed_tokens.weight"] = embed.float()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        sys.exit(f"export.py: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model.eval()


def save_hf(model, tokenizer_dir, out, dtype=torch.float16):
    if os.path.isdir(out):
        shutil.rmtree(out)
    m = copy.deepcopy(model).to(dtype)  # a copy: .to() also casts buffers (RoPE inv_freq)
    m.config.torch_dtype = dtype
    m.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        src = os.path.join(tokenizer_dir, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, name))


def save_dflash(tensors, cfg, out):
    from safetensors.torch import save_file
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    save_file({k: v.to(torch.float16).contiguous() for k, v in sorted(tensors.items())},
              os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(clean_config(cfg), f, indent=2, sort_keys=True)
        f.write("\n")


def check(folder, reference, tokenizer_dir, n_tokens=16):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    loaded = AutoModelForCausalLM.from_pretrained(folder).float().eval()
    ref = copy.deepcopy(reference).eval()
    with torch.no_grad():
        for p in ref.parameters():  # what the f16 folder holds; buffers (RoPE inv_freq) stay f32
            p.copy_(p.half().float())
    worst = 0.0
    for prompt in ("这家酒店的服务", "The history of the city"):
        ids = torch.tensor([tok.encode(prompt, add_special_tokens=False).ids])
        with torch.no_grad():
            a = loaded(input_ids=ids).logits
            b = ref(input_ids=ids).logits
            worst = max(worst, (a - b).abs().max().item())
            out = loaded.generate(ids, max_new_tokens=n_tokens, do_sample=False)
        print(f"[check] {folder}: {tok.decode(out[0].tolist())!r}")
    print(f"[check] {folder}: reloaded vs in-memory f16 weights, max |logit diff| {worst:.2e}")
    if worst > 1e-4:
        sys.exit("export.py: reloaded logits differ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", required=True, help="folder with pack-NN.safetensors and configs.json")
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", default="build/pocket-mini")
    ap.add_argument("--name", default="pocket-mini")
    ap.add_argument("--gguf", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    models, configs = packing.unpack(args.pack)
    os.makedirs(args.out, exist_ok=True)
    target = build_model(configs["target"], models["target"])
    tdir = os.path.join(args.out, args.name)
    save_hf(target, args.tokenizer, tdir)
    print(f"[export] {tdir}")
    if args.check:
        check(tdir, target, args.tokenizer)
    if "draft" in models:
        draft = build_model(configs["draft"], models["draft"], embed=models["target"]["model.embed_tokens.weight"])
        ddir = os.path.join(args.out, f"{args.name}-draft")
        save_hf(draft, args.tokenizer, ddir)
        print(f"[export] {ddir}")
        if args.check:
            check(ddir, draft, args.tokenizer, n_tokens=8)
    if "dflash" in models:
        fdir = os.path.join(args.out, f"{args.name}-dflash")
        save_dflash(models["dflash"], configs["dflash"], fdir)
        print(f"[export] {fdir}")
    if args.gguf:
        import gguf_export
        path = os.path.join(args.out, f"{args.name}.gguf")
        gguf_export.write_gguf(tdir, path)
        print(f"[export] {path}")
    print(f"[export] INT4: build/release/pocket quantize {tdir} {os.path.join(args.out, args.name)}.pq4 --weights q4")


if __name__ == "__main__":
    main()
