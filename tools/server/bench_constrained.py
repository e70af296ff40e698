"""What constrained slots (response_format json_schema) cost in a batch of
`pocket serve`: rounds of 4 concurrent streams, alternating "plain" (4 free
streams) and "mixed" (2 free + 2 constrained by SCHEMA), on one server.
Reports each kind's per-stream decode rate (tokens after the first over the
time from the first to the last token) as the median over the rounds, and
the mean mask time per constrained token from /metrics. Greedy by default
(--temperature), so every row's sampling costs the same.

    python bench_constrained.py --pocket build/release/pocket --model p03.pocket [--reps 5]
"""
import argparse
import http.client
import json
import statistics
import threading
import time

from pocket_server import PocketServer

# Long by construction (at least 200 items), so the constrained streams run
# as long as the free ones; strings with maxLength are the common case (and
# the matcher's slower one: every character count is a new state).
SCHEMA = {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 200}


def stream(srv, max_tokens, seed, constrained, out, temperature):
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=600)
    body = {"model": "m", "prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": temperature,
            "ignore_eos": True, "stream": True, "seed": seed}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "tags", "schema": SCHEMA}}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    times = []
    for line in r:
        if line.startswith(b"data: {") and b'"text":"' in line and b'"finish_reason":null' in line:
            times.append(time.perf_counter())
    conn.close()
    out.append((constrained, (len(times) - 1) / (times[-1] - times[0])))


def round_rates(srv, constrained_flags, max_tokens, seed, temperature=0.0):
    out = []
    threads = [threading.Thread(target=stream, args=(srv, max_tokens, seed + i, c, out, temperature))
               for i, c in enumerate(constrained_flags)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    free = [r for c, r in out if not c]
    cons = [r for c, r in out if c]
    return statistics.mean(free), (statistics.mean(cons) if cons else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=5)
    # 0 (greedy) by default: at temperature > 0 with OpenAI's defaults (no top-k) the sampler sorts
    # the whole vocabulary per row, which is cheaper over masked logits and hides the mask's cost.
    ap.add_argument("--temperature", type=float, default=0.0)
    a = ap.parse_args()
    plain, mixed_free, mixed_cons = [], [], []
    with PocketServer(a.pocket, a.model, "-p", "4", "-c", "512") as srv:
        round_rates(srv, [False, False, True, True], 16, 0)  # warm up: compile the schema once
        m0 = srv.metrics()
        for rep in range(a.reps):  # alternated (and which goes first too), so both see the same machine
            for kind in (("plain", "mixed") if rep % 2 == 0 else ("mixed", "plain")):
                if kind == "plain":
                    plain.append(round_rates(srv, [False] * 4, a.max_tokens, 100 * rep, a.temperature)[0])
                else:
                    f, c = round_rates(srv, [False, False, True, True], a.max_tokens, 100 * rep, a.temperature)
                    mixed_free.append(f)
                    mixed_cons.append(c)
            print(f"rep {rep + 1}: plain {plain[-1]:.2f}, mixed free {f:.2f}, mixed constrained {c:.2f} tok/s/stream",
                  flush=True)
        m1 = srv.metrics()
    toks = m1["pocket_constrained_tokens_total"] - m0["pocket_constrained_tokens_total"]
    secs = m1["pocket_constraint_mask_seconds_total"] - m0["pocket_constraint_mask_seconds_total"]
    p, f, c = (statistics.median(x) for x in (plain, mixed_free, mixed_cons))
    # Ratios within each pair of rounds (the same minutes of the machine).
    rf = statistics.median(x / y for x, y in zip(mixed_free, plain))
    rc = statistics.median(x / y for x, y in zip(mixed_cons, plain))
    print("\n| 4 streams | free streams tok/s (each) | constrained streams tok/s (each) |")
    print("|---|---|---|")
    print(f"| 4 free | {p:.2f} | - |")
    print(f"| 2 free + 2 constrained | {f:.2f} (paired ratio {rf:.2f}) | {c:.2f} (paired ratio {rc:.2f}) |")
    mask_us = 1e6 * secs / max(1, toks)
    print(f"\nmask time: {mask_us:.0f} us per constrained token (mean over {int(toks)} tokens); "
          f"with 2 constrained rows per step that is {100 * 2 * mask_us * 1e-6 * f:.1f}% of a step at {f:.2f} steps/s")


if __name__ == "__main__":
    main()
