#!/usr/bin/env python3
"""Training throughput of a pocket-mini shape on this CPU, wall and CPU time.

Runs a few AdamW steps of train.py's target (random tokens, the given shape
and vocabulary) and prints tokens/s by the wall clock and by CPU time (process
time over all threads, divided by the thread count): on a shared machine the
second is what the same threads would do with the cores to themselves.

  python3 tools/train/bench_cpu.py [--vocab 64064] [--batch 16] [--seq-len 256] [--steps 3] [train.py shape flags]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=64064)
    ap.add_argument("--bench-steps", type=int, default=3)
    a, rest = ap.parse_known_args()
    args = train.parse_args(rest)
    torch.manual_seed(0)
    cfg = train.target_config(args, a.vocab, 0)
    model = train.Qwen3ForCausalLM(cfg)
    opt = train.make_optimizer(list(model.parameters()), 1e-3, 0.1, "cpu")
    n_tok = args.batch * args.seq_len

    def step():
        x = torch.randint(0, a.vocab, (args.batch, args.seq_len + 1))
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up
    w, c = time.perf_counter(), time.process_time()
    for _ in range(a.bench_steps):
        step()
    wall = (time.perf_counter() - w) / a.bench_steps
    cpu = (time.process_time() - c) / a.bench_steps
    th = torch.get_num_threads()
    load = os.getloadavg()[0]
    print(f"shape hidden {args.hidden} x {args.layers} layers, ffn {args.ffn}, vocab {a.vocab}: "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params; {args.batch}x{args.seq_len} tokens/step; "
          f"{th} threads, load average {load:.1f}")
    print(f"wall {wall:.2f} s/step = {n_tok / wall:.0f} tok/s; cpu {cpu:.2f} s/step = "
          f"{n_tok / (cpu / th):.0f} tok/s with {th} cores to itself; "
          f"2 h = {7200 * n_tok / wall / 1e6:.2f}M tokens (wall) / {7200 * n_tok / (cpu / th) / 1e6:.2f}M (cpu)")


if __name__ == "__main__":
    main()
