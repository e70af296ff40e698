#!/usr/bin/env python3
"""Fill the pocket-mini model card from a training run's log.json.

Reads the template (default docs/pocket-mini.md as committed, with {{field}}
markers) and writes the filled card. Fields come from log.json (train.py), the
corpus manifest (make_corpus.py) and, when given, the shipped files' sizes.

  python3 tools/train/model_card.py build/train-out/log.json [--files build/pocket-mini] \
      [--template tools/train/model_card.md] [--out docs/pocket-mini.md]
"""
import argparse
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def mb(n):
    return f"{n / 1e6:.1f} MB"


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def fields(log, files_dir, manifest):
    t = log["target"]
    cfg = t["config"]
    ho = t["final_heldout"]
    f = {
        "device": log.get("device", "?"),
        "versions": ", ".join(f"{k} {v}" for k, v in log.get("versions", {}).items()),
        "seed": log["args"]["seed"],
        "params": f"{t['parameters'] / 1e6:.2f}M",
        "embed_params": f"{t['embedding_parameters'] / 1e6:.2f}M",
        "hidden": cfg["hidden_size"], "layers": cfg["num_hidden_layers"], "heads": cfg["num_attention_heads"],
        "kv_heads": cfg["num_key_value_heads"], "head_dim": cfg["head_dim"], "ffn": cfg["intermediate_size"],
        "vocab": cfg["vocab_size"], "tok_vocab": log["data"]["vocab_size"],
        "rope_theta": cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta")),
        "seq_len": log["args"]["seq_len"], "batch": log["args"]["batch"], "lr": log["args"]["lr"],
        "steps": t["steps"], "best_step": t["best_step"], "tokens_seen": f"{t['tokens_seen'] / 1e6:.1f}M",
        "epochs": t["epochs"], "train_tokens": f"{log['data']['files']['train.bin']['tokens'] / 1e6:.2f}M",
        "train_minutes": f"{t['train_wall_s'] / 60:.1f}", "tokens_per_s": f"{t['tokens_per_s']:.0f}",
        "ppl_zh": ho["zh"]["ppl"], "ppl_en": ho["en"]["ppl"], "loss_zh": ho["zh"]["loss"], "loss_en": ho["en"]["loss"],
        "eval_tokens": ", ".join(f"{k} {v}" for k, v in log.get("eval_tokens_per_language", {}).items()),
        "heldout_tokens": ", ".join(f"{k.split('.')[0].replace('heldout_', '')} {v['tokens']}"
                                    for k, v in log["data"]["files"].items() if k.startswith("heldout")),
        "samples": "\n".join(f"| `{s['prompt']}` | {cell(s['greedy'][len(s['prompt']):])} |"
                             for s in log.get("samples", [])) or "| (none logged) | |",
    }
    d = log.get("draft")
    f["draft"] = (f"{d['layers']} layer(s), {d['steps']} steps, {d['tokens_seen'] / 1e6:.1f}M tokens; held-out "
                  f"top-1 agreement with the target {d['end']['top1_agreement']:.3f} (start "
                  f"{d['start']['top1_agreement']:.3f}), KL {d['end']['kl']:.3f}, own perplexity "
                  f"{d['end']['heldout_ppl']:.1f}") if d else "not trained in this run"
    d = log.get("dflash")
    f["dflash"] = (f"{d['layers']} layer(s) over target layers {d['target_layer_ids']}, block {d['block_size']}, "
                   f"mask token {d['mask_token_id']}, {d['steps']} steps; held-out acceptance length (teacher-forced, "
                   f"greedy) {d['end']['acceptance_length']:.3f} (start {d['start']['acceptance_length']:.3f}); "
                   f"accuracy by block position {d['end']['per_position_accuracy']}") if d else "not trained in this run"
    sizes = []
    if files_dir and os.path.isdir(files_dir):
        for root, _, names in os.walk(files_dir):
            for n in sorted(names):
                p = os.path.join(root, n)
                sizes.append(f"| `{os.path.relpath(p, files_dir)}` | {mb(os.path.getsize(p))} |")
    f["files"] = "\n".join(sizes) or "| (not exported yet) | |"
    rows = []
    for s in manifest.get("sources", []):
        rows.append(f"| {s['lang']} | {s['name']} | {s['rows']['train']} | {s['chars']['train']} | "
                    f"{s['rows']['heldout']} | {s['chars']['heldout']} |")
    f["sources"] = "\n".join(rows) or "| | (build/corpus/manifest.json not found) | | | | |"
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--files", default=None, help="folder of the exported files (sizes)")
    ap.add_argument("--manifest", default="build/corpus/manifest.json")
    ap.add_argument("--template", default=os.path.join(HERE, "model_card.md"))
    ap.add_argument("--out", default="docs/pocket-mini.md")
    args = ap.parse_args()
    with open(args.log, encoding="utf-8") as fh:
        log = json.load(fh)
    if "from" in log.get("target", {}):
        raise SystemExit(f"model_card.py: {args.log} is a drafts-only run on {log['target']['from']} (--init-target): "
                         "the card is filled from the run that trained the target")
    manifest = {}
    if os.path.exists(args.manifest):
        with open(args.manifest, encoding="utf-8") as fh:
            manifest = json.load(fh)
    with open(args.template, encoding="utf-8") as fh:
        text = fh.read()
    vals = fields(log, args.files, manifest)
    missing = sorted(set(re.findall(r"\{\{(\w+)\}\}", text)) - set(vals))
    if missing:
        raise SystemExit(f"model_card.py: no value for {missing}")
    text = re.sub(r"\{\{(\w+)\}\}", lambda m: str(vals[m.group(1)]), text)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(args.out)


if __name__ == "__main__":
    main()
