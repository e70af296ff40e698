#!/usr/bin/env python3
"""What the Python binding costs per generated token: decode tok/s (the
library's own decode timer, which includes the callbacks) of one session
generating without a callback, with on_text, and with stream=True
(worker thread + queue), alternated run by run; medians.
    python bench/bindings_overhead.py MODEL [--tokens N] [--runs R] [--threads T]
(run with the venv of scripts/bindings.sh: build/bindings-venv/bin/python)"""
import argparse
import statistics

import pocket

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--tokens", type=int, default=200)
ap.add_argument("--runs", type=int, default=7)
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()

opts = dict(max_tokens=a.tokens, temperature=0, ignore_eos=True)
with pocket.Model(a.model) as model, model.session(threads=a.threads) as s:
    ways = {
        "no callback": lambda: s.generate("Once upon a time", **opts),
        "on_text": lambda: s.generate("Once upon a time", on_text=lambda p: None, **opts),
        "stream=True": lambda: "".join(s.generate("Once upon a time", stream=True, **opts)),
    }
    rates = {k: [] for k in ways}
    ways["no callback"]()  # warm-up
    for _ in range(a.runs):
        for name, run in ways.items():
            s.reset()
            run()
            rates[name].append(s.stats.decode_tokens_per_second)
    base = statistics.median(rates["no callback"])
    print(f"{a.model}: {a.tokens} tokens, {a.threads} thread(s), median of {a.runs}")
    for name, r in rates.items():
        m = statistics.median(r)
        per_token_us = (1 / m - 1 / base) * 1e6
        print(f"  {name:12s} {m:9.0f} tok/s   (+{per_token_us:5.1f} us/token vs no callback; "
              f"range {min(r):.0f}-{max(r):.0f})")
