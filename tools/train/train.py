#!/usr/bin/env python3
"""Train pocket-mini (a small Qwen3-architecture model) and its two drafts.

One run, three phases, each on a wall-clock budget (or a fixed step count):

  1. target   Qwen3ForCausalLM from a transformers Qwen3Config (GQA, q/k
              RMSNorm, SwiGLU, RoPE, tied embeddings) trained from scratch on
              DATA/train.bin (prepare.py) with AdamW, linear warm-up and cosine
              decay; held-out loss / perplexity on DATA/heldout_{zh,en}.bin at
              fixed windows; the best held-out state is kept.
  2. draft    a plain 1-2 layer Qwen3ForCausalLM that shares the target's
              (frozen) embedding and tied head, its layers initialised from the
              target's first layers, distilled on the target's logits (soft
              cross-entropy = KL up to a constant).
  3. dflash   a DFlash-style block draft (z-lab format): 1-2 Qwen3 layers over
              the fused hidden states of chosen target layers (fc + RMSNorm),
              bidirectional within a block of [anchor, mask x (B-1)], keys and
              values from the context's fused states plus the block; shares the
              target's embedding and head; block-wise cross-entropy against the
              target's greedy tokens at the block positions.

--init-target DIR skips phase 1 and trains the drafts against an already
trained target (e.g. the shipped models/pocket-mini); --draft-vocab-file F with
--draft-vocab N distils the plain draft on the first N ids of a `pocket
draft-vocab` ranking only (what `pocket run --draft-model --draft-vocab N` lets
it propose; ~3x cheaper on CPU than the whole 64K vocabulary).

--minutes / --draft-minutes / --dflash-minutes plan each phase's step count
from measured step and evaluation times (the timing steps are undone, so the
run is the same as one with --steps N; the chosen N is logged). A run with the
same seed and step counts is bit-identical on CPU; on CUDA it is the same up to
non-deterministic GPU kernels.

Writes OUT/pack-NN.safetensors + OUT/configs.json (packing.py: f16, files
under 15 MB, at most a handful) and OUT/log.json (config, steps, tokens seen,
losses, held-out perplexities, draft metrics, sample generations). export.py
turns the pack into the Hugging Face folders, the z-lab DFlash folder and GGUF.

  python3 tools/train/train.py --data build/train-data --tokenizer DIR \
      --out build/train-out --device cpu --minutes 2 --draft-minutes 0.5 --dflash-minutes 0.5
"""
import argparse
import copy
import json
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import packing  # noqa: E402
from dflash_draft import DFlashDraft, build_target_layer_ids  # noqa: E402

import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

SAMPLE_PROMPTS = [
    "这家酒店的服务",
    "今天的新闻",
    "The history of the city",
    "In 1998, the team",
]


# ---------------------------------------------------------------------------
# setup
# ---------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="build/train-data", help="folder written by prepare.py")
    ap.add_argument("--tokenizer", default=None, help="folder with tokenizer.json (for sample generations)")
    ap.add_argument("--out", default="build/train-out")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch default)")
    # target shape
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--max-pos", type=int, default=2048, help="max_position_embeddings in the config")
    # target optimisation
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup-frac", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--init-target", default="",
                    help="Hugging Face folder of an already trained target (e.g. models/pocket-mini): "
                         "phase 1 is skipped and the drafts are trained against it")
    ap.add_argument("--minutes", type=float, default=2.0, help="target training budget")
    ap.add_argument("--steps", type=int, default=0, help="fixed target steps (overrides --minutes)")
    ap.add_argument("--max-epochs", type=float, default=0.0,
                    help="cap the planned target steps at this many passes over train.bin (0 = no cap)")
    ap.add_argument("--evals", type=int, default=10, help="held-out evaluations during the target phase")
    ap.add_argument("--eval-windows", type=int, default=32, help="held-out windows per language")
    # plain draft
    ap.add_argument("--draft-layers", type=int, default=1)
    ap.add_argument("--draft-minutes", type=float, default=1.0)
    ap.add_argument("--draft-steps", type=int, default=0)
    ap.add_argument("--draft-lr", type=float, default=1e-3)
    ap.add_argument("--draft-vocab-file", default="",
                    help="a `pocket draft-vocab` ranking: distil the plain draft on its first --draft-vocab ids only "
                         "(what `pocket run --draft-model F --draft-vocab N` scores)")
    ap.add_argument("--draft-vocab", type=int, default=16384)
    # DFlash draft
    ap.add_argument("--dflash-layers", type=int, default=1)
    ap.add_argument("--dflash-minutes", type=float, default=1.0)
    ap.add_argument("--dflash-steps", type=int, default=0)
    ap.add_argument("--dflash-lr", type=float, default=1e-3)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--blocks-per-seq", type=int, default=8, help="anchors drawn per training sequence")
    ap.add_argument("--dflash-target-layers", default="",
                    help="comma-separated target layer ids to fuse (default: z-lab's spacing of 3 layers)")
    ap.add_argument("--dflash-gamma", type=float, default=0.0,
                    help="loss weight exp(-(k-1)/gamma) at block position k (0 = uniform)")
    ap.add_argument("--total-minutes", type=float, default=0.0,
                    help="whole-run budget: after the target, the time left (less a reserve for writing) is "
                         "split between the two drafts in the ratio of their --*-minutes (0 = off)")
    ap.add_argument("--sample-tokens", type=int, default=40)
    ap.add_argument("--smoke", action="store_true", help="tiny budgets: the whole pipeline in well under a minute")
    args = ap.parse_args(argv)
    if args.smoke:
        args.minutes, args.draft_minutes, args.dflash_minutes = 0.25, 0.1, 0.1
        args.evals, args.eval_windows, args.sample_tokens, args.total_minutes = 2, 4, 8, 0.0
    return args


def seed_all(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def load_data(data_dir):
    with open(os.path.join(data_dir, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    dt = np.dtype(meta["dtype"]).newbyteorder("<")
    arrays = {name: np.fromfile(os.path.join(data_dir, name), dtype=dt)
              for name in ("train.bin", "heldout_zh.bin", "heldout_en.bin")}
    return meta, arrays


class Batches:
    """Random windows of seq_len + 1 tokens from one array; its own seeded RNG."""

    def __init__(self, data, seq_len, batch, seed):
        self.data, self.seq_len, self.batch = data, seq_len, batch
        self.rng = np.random.default_rng(seed)

    def next(self, device):
        idx = self.rng.integers(0, len(self.data) - self.seq_len - 1, size=self.batch)
        x = np.stack([self.data[i:i + self.seq_len + 1] for i in idx]).astype(np.int64)
        return torch.from_numpy(x).to(device, non_blocking=True)


def eval_windows(data, seq_len, n):
    """n fixed, evenly spaced windows of seq_len + 1 tokens (the same every run)."""
    n = max(1, min(n, (len(data) - 1) // (seq_len + 1)))
    starts = np.linspace(0, len(data) - seq_len - 2, n).astype(np.int64)
    return torch.from_numpy(np.stack([data[s:s + seq_len + 1] for s in starts]).astype(np.int64))


def autocast(device):
    if device == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def lr_at(step, total, peak, warmup, min_frac):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def make_optimizer(params, lr, wd, device):
    decay = [p for p in params if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in params if p.requires_grad and p.dim() < 2]
    kw = {"fused": True} if device == "cuda" else {"foreach": False}
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, **kw)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def plan_steps(label, fixed, minutes, step_time, eval_time, n_evals, spent):
    """Steps that fit the phase budget after evaluations and the time already spent."""
    if fixed:
        return fixed
    left = minutes * 60.0 - spent - n_evals * eval_time
    steps = max(2, int(left / step_time))
    print(f"[{label}] step {step_time:.3f}s, eval {eval_time:.2f}s, budget {minutes:.2f} min -> {steps} steps",
          flush=True)
    return steps


def timed_probe(step_fn, modules, opt, n, device):
    """Seconds per step over n steps after one warm-up step, then every state restored."""
    saved = [copy.deepcopy(m.state_dict()) for m in modules]
    saved_opt = copy.deepcopy(opt.state_dict())
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if device == "cuda" else None
    step_fn(0, probe=True)
    sync(device)
    t = time.perf_counter()
    for i in range(n):
        step_fn(0, probe=True)
    sync(device)
    dt = (time.perf_counter() - t) / n
    for m, s in zip(modules, saved):
        m.load_state_dict(s)
    opt.load_state_dict(saved_opt)
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    return dt


# ---------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------

def target_config(args, vocab_size, eos_id):
    cfg = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        hidden_act="silu",
        max_position_embeddings=args.max_pos,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        use_cache=True,
        tie_word_embeddings=True,
        rope_theta=args.rope_theta,
        attention_bias=False,
        attention_dropout=0.0,
        use_sliding_window=False,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    cfg.architectures = ["Qwen3ForCausalLM"]
    return cfg


def model_state(model):
    """Plain state dict without the tied lm_head copy."""
    sd = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    return sd


@torch.no_grad()
def eval_target(model, windows, device, bs=16):
    model.eval()
    out = {}
    for lang, w in windows.items():
        tot, n = 0.0, 0
        for i in range(0, len(w), bs):
            x = w[i:i + bs].to(device)
            with autocast(device):
                logits = model(input_ids=x[:, :-1]).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
            tot += loss.item()
            n += x[:, 1:].numel()
        out[lang] = tot / n
    model.train()
    out["mean"] = sum(out[k] for k in windows) / len(windows)
    return {k: {"loss": round(v, 5), "ppl": round(math.exp(min(v, 50)), 3)} for k, v in out.items()}


def train_target(args, arrays, vocab_size, eos_id, log, windows):
    device = args.device
    seed_all(args.seed)
    cfg = target_config(args, vocab_size, eos_id)
    model = Qwen3ForCausalLM(cfg).to(device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.model.embed_tokens.weight.numel()
    print(f"[target] {n_params / 1e6:.2f}M parameters ({n_embed / 1e6:.2f}M embedding), "
          f"f16 {n_params * 2 / 1e6:.1f} MB", flush=True)
    opt = make_optimizer(list(model.parameters()), args.lr, args.weight_decay, device)
    batches = Batches(arrays["train.bin"], args.seq_len, args.batch, args.seed + 1)
    tokens_per_step = args.batch * args.seq_len
    state = {"total": args.steps or 1000}

    def step_fn(step, probe=False):
        lr = lr_at(step, state["total"], args.lr, max(1, int(args.warmup_frac * state["total"])), args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batches.next(device) if not probe else torch.randint(0, vocab_size - 1, (args.batch, args.seq_len + 1),
                                                                   device=device)
        with autocast(device):
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        return loss, gn, lr

    t_phase = time.perf_counter()
    t = time.perf_counter()
    ev = eval_target(model, windows, device)
    eval_time = time.perf_counter() - t
    step_time = timed_probe(step_fn, [model], opt, 2 if device == "cpu" else 5, device)
    total = plan_steps("target", args.steps, args.minutes, step_time, eval_time, args.evals,
                       time.perf_counter() - t_phase)
    if args.max_epochs > 0 and not args.steps:
        cap = max(2, int(args.max_epochs * len(arrays["train.bin"]) / tokens_per_step))
        if cap < total:
            print(f"[target] capped at {args.max_epochs} epochs: {cap} steps", flush=True)
            total = cap
    state["total"] = total
    eval_every = max(1, total // max(1, args.evals))
    log["target"] = {"config": cfg.to_dict(), "parameters": n_params, "embedding_parameters": n_embed,
                     "tokens_per_step": tokens_per_step, "steps": total, "measured_step_s": round(step_time, 4),
                     "measured_tokens_per_s": round(tokens_per_step / step_time, 1),
                     "train": [], "heldout": [{"step": 0, "tokens": 0, **ev}]}
    print(f"[target] step 0 held-out {json.dumps(ev)}", flush=True)
    best = (ev["mean"]["loss"], 0, None)
    t_train = time.perf_counter()
    run_loss = []
    for step in range(total):
        loss, gn, lr = step_fn(step)
        run_loss.append(loss.item())
        done = step + 1
        if done % max(1, total // 200) == 0 or done == total:
            log["target"]["train"].append({"step": done, "tokens": done * tokens_per_step,
                                           "loss": round(sum(run_loss) / len(run_loss), 5),
                                           "lr": round(lr, 7), "grad_norm": round(float(gn), 4)})
            run_loss = []
        if done % eval_every == 0 or done == total:
            ev = eval_target(model, windows, device)
            el = time.perf_counter() - t_train
            log["target"]["heldout"].append({"step": done, "tokens": done * tokens_per_step,
                                             "elapsed_s": round(el, 1), **ev})
            print(f"[target] step {done}/{total} loss {log['target']['train'][-1]['loss']:.4f} "
                  f"held-out zh {ev['zh']['ppl']:.2f} en {ev['en']['ppl']:.2f} ppl, "
                  f"{done * tokens_per_step / el:.0f} tok/s, {el:.0f}s", flush=True)
            if ev["mean"]["loss"] < best[0]:
                best = (ev["mean"]["loss"], done, {k: v.detach().clone() for k, v in model.state_dict().items()})
    wall = time.perf_counter() - t_train
    if best[2] is not None and best[1] != total:
        print(f"[target] held-out best at step {best[1]} (of {total}); keeping it", flush=True)
        model.load_state_dict(best[2])
    log["target"].update({"best_step": best[1], "tokens_seen": total * tokens_per_step,
                          "epochs": round(total * tokens_per_step / len(arrays["train.bin"]), 3),
                          "train_wall_s": round(wall, 1),
                          "tokens_per_s": round(total * tokens_per_step / wall, 1),
                          "final_heldout": eval_target(model, windows, device)})
    model.eval()
    return model, cfg


def load_target(args, vocab_size, log, windows):
    """A trained target from a Hugging Face folder (its f16 weights, computed in f32)."""
    model = Qwen3ForCausalLM.from_pretrained(args.init_target, dtype=torch.float32).to(args.device)
    cfg = model.config
    if cfg.vocab_size != vocab_size:
        sys.exit(f"train.py: {args.init_target} has {cfg.vocab_size} embedding rows, the data's vocabulary needs "
                 f"{vocab_size}: prepare.py must use that folder's tokenizer")
    model.eval()
    ev = eval_target(model, windows, args.device)
    log["target"] = {"from": args.init_target, "config": cfg.to_dict(), "final_heldout": ev}
    print(f"[target] loaded {args.init_target}: held-out {json.dumps(ev)}", flush=True)
    return model, cfg


# ---------------------------------------------------------------------------
# plain draft
# ---------------------------------------------------------------------------

def read_ranking(path, n, vocab_size, device):
    """The first n ids of a `pocket draft-vocab` ranking (header `pocket-draft-vocab 1 V`, one id a line)."""
    with open(path, encoding="utf-8") as f:
        head = f.readline().split()
        if head[:2] != ["pocket-draft-vocab", "1"] or int(head[2]) != vocab_size:
            sys.exit(f"train.py: {path} is not a draft vocabulary ranking for {vocab_size} rows")
        ids = [int(line) for line in f if line.strip()]
    if not 0 < n <= len(ids):
        sys.exit(f"train.py: --draft-vocab {n}, but {path} ranks {len(ids)} ids")
    return torch.tensor(ids[:n], dtype=torch.long, device=device)


def train_plain_draft(args, target, tcfg, arrays, log, windows):
    device = args.device
    seed_all(args.seed + 100)
    base = {k: v for k, v in tcfg.to_dict().items() if k not in ("layer_types", "transformers_version")}
    dcfg = Qwen3Config(**{**base, "num_hidden_layers": args.draft_layers})
    dcfg.architectures = ["Qwen3ForCausalLM"]
    draft = Qwen3ForCausalLM(dcfg).to(device)
    # start from the target: its embedding (shared, frozen), first layers and final norm
    with torch.no_grad():
        draft.model.embed_tokens.weight = target.model.embed_tokens.weight
        draft.lm_head.weight = target.model.embed_tokens.weight
        for i, layer in enumerate(draft.model.layers):
            layer.load_state_dict(target.model.layers[i].state_dict())
        draft.model.norm.load_state_dict(target.model.norm.state_dict())
    for p in target.parameters():
        p.requires_grad_(False)
    params = [p for n, p in draft.named_parameters() if "embed_tokens" not in n and "lm_head" not in n]
    opt = make_optimizer(params, args.draft_lr, 0.0, device)
    batches = Batches(arrays["train.bin"], args.seq_len, args.batch, args.seed + 101)
    tokens_per_step = args.batch * args.seq_len
    state = {"total": args.draft_steps or 1000}
    subset = read_ranking(args.draft_vocab_file, args.draft_vocab, tcfg.vocab_size, device) \
        if args.draft_vocab_file else None
    head = target.model.embed_tokens.weight

    def logits_of(model, inp):
        """Full logits, or with a ranking only its first N columns (the head's rows gathered)."""
        if subset is None:
            return model(input_ids=inp).logits
        return F.linear(model.model(input_ids=inp).last_hidden_state, head[subset])

    def step_fn(step, probe=False):
        lr = lr_at(step, state["total"], args.draft_lr, max(1, state["total"] // 20), args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batches.next(device) if not probe else torch.randint(0, tcfg.vocab_size - 1,
                                                                   (args.batch, args.seq_len + 1), device=device)
        inp = x[:, :-1]
        with torch.no_grad(), autocast(device):
            t_logits = logits_of(target, inp)
        with autocast(device):
            d_logits = logits_of(draft, inp)
        p_t = F.softmax(t_logits.float(), dim=-1)
        loss = -(p_t * F.log_softmax(d_logits.float(), dim=-1)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        return loss, lr

    @torch.no_grad()
    def evaluate():
        draft.eval()
        agree, agree_full, n, ce, kl = 0, 0, 0, 0.0, 0.0
        for w in windows.values():
            for i in range(0, len(w), 16):
                x = w[i:i + 16].to(device)
                with autocast(device):
                    tl = target(input_ids=x[:, :-1]).logits.float()
                    dl = draft(input_ids=x[:, :-1]).logits.float()
                agree_full += (tl.argmax(-1) == dl.argmax(-1)).sum().item()
                if subset is not None:  # the draft proposes from the ranking's first N ids only
                    agree += (tl.argmax(-1) == subset[dl[..., subset].argmax(-1)]).sum().item()
                n += tl.shape[0] * tl.shape[1]
                ce += F.cross_entropy(dl.reshape(-1, dl.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
                lp_t = F.log_softmax(tl, -1)
                kl += (lp_t.exp() * (lp_t - F.log_softmax(dl, -1))).sum().item()
        draft.train()
        out = {"top1_agreement": round(agree_full / n, 4)}
        if subset is not None:
            out[f"top1_agreement_top{subset.numel()}"] = round(agree / n, 4)
        return {**out, "heldout_ppl": round(math.exp(ce / n), 3),
                "kl": round(kl / n, 5)}

    t_phase = time.perf_counter()
    t = time.perf_counter()
    ev0 = evaluate()
    eval_time = time.perf_counter() - t
    step_time = timed_probe(step_fn, [draft], opt, 2 if device == "cpu" else 5, device)
    total = plan_steps("draft", args.draft_steps, args.draft_minutes, step_time, eval_time, 2,
                       time.perf_counter() - t_phase)
    state["total"] = total
    print(f"[draft] {args.draft_layers} layer(s), start {ev0}", flush=True)
    rec = {"config": dcfg.to_dict(), "layers": args.draft_layers, "steps": total,
           "draft_vocab": int(subset.numel()) if subset is not None else 0,
           "tokens_seen": total * tokens_per_step, "start": ev0, "train": []}
    t0, run = time.perf_counter(), []
    for step in range(total):
        loss, lr = step_fn(step)
        run.append(loss.item())
        if (step + 1) % max(1, total // 50) == 0 or step + 1 == total:
            rec["train"].append({"step": step + 1, "soft_ce": round(sum(run) / len(run), 5), "lr": round(lr, 7)})
            run = []
    rec["train_wall_s"] = round(time.perf_counter() - t0, 1)
    rec["end"] = evaluate()
    print(f"[draft] {total} steps, end {rec['end']}", flush=True)
    log["draft"] = rec
    draft.eval()
    state_dict = {k: v for k, v in draft.state_dict().items() if "embed_tokens" not in k and k != "lm_head.weight"}
    return draft, dcfg, state_dict


# ---------------------------------------------------------------------------
# DFlash block draft
# ---------------------------------------------------------------------------

def train_dflash(args, target, tcfg, arrays, log, windows, mask_id):
    device = args.device
    seed_all(args.seed + 200)
    layer_ids = ([int(s) for s in args.dflash_target_layers.split(",")] if args.dflash_target_layers
                 else build_target_layer_ids(tcfg.num_hidden_layers, 3))
    B = args.block_size
    dfl = DFlashDraft(hidden=tcfg.hidden_size, ffn=tcfg.intermediate_size, layers=args.dflash_layers,
                      heads=tcfg.num_attention_heads, kv_heads=tcfg.num_key_value_heads, head_dim=tcfg.head_dim,
                      n_fused=len(layer_ids), rope_theta=args.rope_theta, eps=tcfg.rms_norm_eps).to(device)
    with torch.no_grad():  # start the layers from the target's last layers (same shapes), as in plain drafts
        for i, layer in enumerate(dfl.layers):
            src = target.model.layers[tcfg.num_hidden_layers - len(dfl.layers) + i].state_dict()
            layer.load_state_dict(src, strict=True)
        dfl.norm.weight.copy_(target.model.norm.weight)
    for p in target.parameters():
        p.requires_grad_(False)
    embed = target.model.embed_tokens.weight  # shared, frozen
    params = list(dfl.parameters())
    opt = make_optimizer(params, args.dflash_lr, 0.0, device)
    batches = Batches(arrays["train.bin"], args.seq_len, args.batch, args.seed + 201)
    rng = np.random.default_rng(args.seed + 202)
    T, nb = args.seq_len, args.blocks_per_seq
    w = torch.ones(B - 1)
    if args.dflash_gamma > 0:
        w = torch.exp(-torch.arange(B - 1, dtype=torch.float32) / args.dflash_gamma)
    w = (w / w.mean()).to(device)

    def anchors(bsz, gen):
        # anchor a: the block is positions a..a+B-1; its context is positions < a (a >= 1)
        return torch.from_numpy(np.sort(gen.integers(1, T - B + 1, size=(bsz, nb)), axis=1)).to(device)

    def forward_blocks(x, anc):
        """Draft logits [b, nb, B-1, V] and target greedy labels [b, nb, B-1] for blocks at anc."""
        with torch.no_grad(), autocast(device):
            out = target(input_ids=x, output_hidden_states=True)
        hs = out.hidden_states
        fused = torch.cat([hs[i + 1] for i in layer_ids], dim=-1).float()  # [b, T, n*H]
        greedy = out.logits.argmax(-1)  # [b, T]: target's next token after each position
        bsz = x.shape[0]
        offs = torch.arange(B, device=device)
        pos = anc[:, :, None] + offs  # [b, nb, B]
        first = torch.gather(x, 1, anc)  # anchor tokens (known)
        blk = torch.full((bsz, nb, B), mask_id, dtype=torch.long, device=device)
        blk[:, :, 0] = first
        labels = torch.gather(greedy, 1, (pos[:, :, 1:] - 1).reshape(bsz, -1)).reshape(bsz, nb, B - 1)
        with autocast(device):
            h = dfl(embed[blk.reshape(bsz, nb * B)], fused, pos.reshape(bsz, nb * B), anc, B)
            logits = F.linear(h.reshape(bsz, nb, B, -1)[:, :, 1:], embed)
        return logits.float(), labels

    def step_fn(step, probe=False):
        lr = lr_at(step, state["total"], args.dflash_lr, max(1, state["total"] // 20), args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batches.next(device)[:, :T] if not probe else torch.randint(0, tcfg.vocab_size - 1, (args.batch, T),
                                                                          device=device)
        anc = anchors(x.shape[0], rng if not probe else np.random.default_rng(0))
        logits, labels = forward_blocks(x, anc)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        loss = (ce.reshape(-1, B - 1) * w).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        return loss, lr

    @torch.no_grad()
    def evaluate():
        dfl.eval()
        gen = np.random.default_rng(7)
        acc_len, n_blocks, correct, n_pos = 0.0, 0, torch.zeros(B - 1), 0
        for wins in windows.values():
            for i in range(0, len(wins), 16):
                x = wins[i:i + 16, :T].to(device)
                logits, labels = forward_blocks(x, anchors(x.shape[0], gen))
                hit = (logits.argmax(-1) == labels).float()  # [b, nb, B-1]
                acc_len += (hit.cumprod(-1).sum(-1) + 1).sum().item()  # accepted drafts + the target's token
                n_blocks += hit.shape[0] * hit.shape[1]
                correct += hit.sum((0, 1)).cpu()
                n_pos += hit.shape[0] * hit.shape[1]
        dfl.train()
        return {"acceptance_length": round(acc_len / n_blocks, 4),
                "per_position_accuracy": [round(v, 4) for v in (correct / n_pos).tolist()]}

    state = {"total": args.dflash_steps or 1000}
    t_phase = time.perf_counter()
    t = time.perf_counter()
    ev0 = evaluate()
    eval_time = time.perf_counter() - t
    step_time = timed_probe(step_fn, [dfl], opt, 2 if device == "cpu" else 5, device)
    total = plan_steps("dflash", args.dflash_steps, args.dflash_minutes, step_time, eval_time, 2,
                       time.perf_counter() - t_phase)
    state["total"] = total
    print(f"[dflash] {args.dflash_layers} layer(s) over target layers {layer_ids}, block {B}, start {ev0}",
          flush=True)
    rec = {"layers": args.dflash_layers, "target_layer_ids": layer_ids, "block_size": B, "mask_token_id": mask_id,
           "steps": total, "blocks_per_seq": nb, "gamma": args.dflash_gamma, "start": ev0, "train": []}
    t0, run = time.perf_counter(), []
    for step in range(total):
        loss, lr = step_fn(step)
        run.append(loss.item())
        if (step + 1) % max(1, total // 50) == 0 or step + 1 == total:
            rec["train"].append({"step": step + 1, "block_ce": round(sum(run) / len(run), 5), "lr": round(lr, 7)})
            run = []
    rec["train_wall_s"] = round(time.perf_counter() - t0, 1)
    rec["end"] = evaluate()
    print(f"[dflash] {total} steps, end {rec['end']}", flush=True)
    log["dflash"] = rec
    cfg = dfl.zlab_config(tcfg, layer_ids, B, mask_id)
    return {k: v for k, v in dfl.state_dict().items()}, cfg


# ---------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------

@torch.no_grad()
def samples(model, tokenizer_dir, n_tokens, device):
    if not tokenizer_dir:
        return []
    from tokenizers import Tokenizer
    path = os.path.join(tokenizer_dir, "tokenizer.json") if os.path.isdir(tokenizer_dir) else tokenizer_dir
    tok = Tokenizer.from_file(path)
    out = []
    for prompt in SAMPLE_PROMPTS:
        ids = torch.tensor([tok.encode(prompt, add_special_tokens=False).ids], device=device)
        for _ in range(n_tokens):
            with autocast(device):
                nxt = model(input_ids=ids).logits[0, -1].float().argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
        out.append({"prompt": prompt, "greedy": tok.decode(ids[0].tolist(), skip_special_tokens=False)})
        print(f"[sample] {out[-1]['greedy']!r}", flush=True)
    return out


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    else:
        torch.use_deterministic_algorithms(True)
    meta, arrays = load_data(args.data)
    n_tok = meta["max_token_id"] + 1
    vocab_size = (n_tok + 1 + 63) // 64 * 64  # spare rows: the first one is the DFlash mask token
    mask_id = n_tok
    eos_id = meta["eos_id"]
    windows = {"zh": eval_windows(arrays["heldout_zh.bin"], args.seq_len, args.eval_windows),
               "en": eval_windows(arrays["heldout_en.bin"], args.seq_len, args.eval_windows)}
    log = {"args": vars(args), "data": {k: v for k, v in meta.items() if k != "inputs"},
           "versions": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": transformers.__version__, "numpy": np.__version__},
           "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu",
           "threads": torch.get_num_threads(), "vocab_size": vocab_size, "eval_tokens_per_language":
           {k: int(v[:, 1:].numel()) for k, v in windows.items()}}
    print(f"[run] torch {torch.__version__}, transformers {transformers.__version__}, device {log['device']}, "
          f"{len(arrays['train.bin'])} train tokens, vocab {n_tok} -> {vocab_size} rows", flush=True)

    if args.init_target:
        target, tcfg = load_target(args, vocab_size, log, windows)
    else:
        target, tcfg = train_target(args, arrays, vocab_size, eos_id, log, windows)
    log["samples"] = samples(target, args.tokenizer, args.sample_tokens, args.device)
    models = {"target": model_state(target)}
    configs = {"target": tcfg.to_dict(), "tokenizer_meta": log["data"]}
    if args.total_minutes > 0:
        left = args.total_minutes * 60 - (time.perf_counter() - t_start) - 20.0
        share = args.draft_minutes + args.dflash_minutes
        if share > 0 and left > 0:
            args.draft_minutes = left / 60 * args.draft_minutes / share
            args.dflash_minutes = left / 60 * args.dflash_minutes / share
            print(f"[run] {left / 60:.2f} min left: draft {args.draft_minutes:.2f}, dflash {args.dflash_minutes:.2f}",
                  flush=True)
    if args.draft_minutes > 0 or args.draft_steps:
        _, dcfg, dstate = train_plain_draft(args, target, tcfg, arrays, log, windows)
        models["draft"] = dstate
        configs["draft"] = dcfg.to_dict()
    if args.dflash_minutes > 0 or args.dflash_steps:
        fstate, fcfg = train_dflash(args, target, tcfg, arrays, log, windows, mask_id)
        models["dflash"] = fstate
        configs["dflash"] = fcfg
    paths = packing.pack(models, configs, args.out)
    log["total_wall_s"] = round(time.perf_counter() - t_start, 1)
    log["files"] = {os.path.basename(p): os.path.getsize(p) for p in paths}
    with open(os.path.join(args.out, "log.json"), "w", encoding="utf-8") as f:
        json.dump(log, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"[run] wrote {', '.join(f'{k} ({v / 1e6:.1f} MB)' for k, v in log['files'].items())}, configs.json, "
          f"log.json to {args.out} in {log['total_wall_s']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
