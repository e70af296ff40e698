"""Aggregate decode throughput of `pocket serve` with 1, 2, 4, 8 concurrent
streams, batched (one forward pass per step for all slots) and, for
comparison, --no-batch (the slots' tokens run one after another).

The rate is measured in the steady state of each round: from the moment
the last stream got its first token to the moment the first stream
ended, counting the tokens every stream received in that window, so prompt
processing and the ramp up / down do not count.

    python bench_streams.py --pocket build/release/pocket --model build/bench/pocket-0.3b.pq4 [--reps 3]
"""
import argparse
import http.client
import json
import statistics
import threading
import time

from pocket_server import PocketServer


def stream(host, port, max_tokens, seed, times):
    conn = http.client.HTTPConnection(host, port, timeout=600)
    body = {"model": "m", "prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "seed": seed}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, r.status
    for line in r:
        if line.startswith(b"data: {") and b'"text":"' in line and b'"finish_reason":null' in line:
            times.append(time.perf_counter())
    conn.close()


def round_rate(srv, k, max_tokens):
    times = [[] for _ in range(k)]
    threads = [threading.Thread(target=stream, args=(srv.host, srv.port, max_tokens, i, times[i])) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = max(t[0] for t in times)
    end = min(t[-1] for t in times)
    n = sum(sum(1 for x in t if start < x <= end) for t in times)
    return n / (end - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--streams", default="1,2,4,8")
    a = ap.parse_args()
    ks = [int(x) for x in a.streams.split(",")]
    rates = {(mode, k): [] for mode in ("batched", "no-batch") for k in ks}
    for rep in range(a.reps):
        for mode in ("batched", "no-batch"):  # alternated, so both see the same machine
            extra = ["--no-batch"] if mode == "no-batch" else []
            with PocketServer(a.pocket, a.model, "-p", str(max(ks)), "-c", "512", *extra) as srv:
                for k in ks:
                    rates[(mode, k)].append(round_rate(srv, k, a.max_tokens))
            print(f"rep {rep + 1} {mode}: " + ", ".join(f"{k}: {rates[(mode, k)][-1]:.1f}" for k in ks), flush=True)
    print("\n| concurrent streams | batched: aggregate tok/s | x 1 stream | --no-batch: aggregate tok/s |")
    print("|---|---|---|---|")
    base = statistics.median(rates[("batched", ks[0])])
    for k in ks:
        b, u = statistics.median(rates[("batched", k)]), statistics.median(rates[("no-batch", k)])
        print(f"| {k} | {b:.1f} | {b / base:.2f} | {u:.1f} |")


if __name__ == "__main__":
    main()
