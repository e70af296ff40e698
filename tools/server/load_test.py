"""Bounded load test of `pocket serve` on loopback: C concurrent streaming
clients send N requests in all (chat and completions, mixed prompts and
lengths); every response must be a well-formed SSE stream (role chunk,
content chunks, one finish_reason, a usage chunk, [DONE]; one id), no
request may fail, and the server's resident memory after the run must be
within LEAK_KB of what it was after the first 100 requests. Stdlib only.

    python load_test.py --pocket build/release/pocket --model ../shared/models/stories260K.bin
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time

from pocket_server import PocketServer

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park.", "One day, a big bird",
           "Tom had a red ball. He", "The sun was hot and"]


def check_stream(body, max_tokens, chat):
    """Parses one SSE body; returns completion_tokens or raises AssertionError."""
    assert body.endswith("data: [DONE]\n\n"), "no [DONE] at the end"
    events = [e for e in body.split("\n\n") if e and not e.startswith(":")]
    assert events[-1] == "data: [DONE]", events[-1]
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert all(e.startswith("data: ") for e in events)
    assert len({c["id"] for c in chunks}) == 1, "ids differ within one stream"
    if chat:
        assert chunks[0]["choices"][0]["delta"].get("role") == "assistant", "no role chunk first"
        chunks = chunks[1:]
    usage = chunks[-1]
    assert usage["choices"] == [] and "usage" in usage, "no usage chunk last"
    finish = chunks[-2]["choices"][0]["finish_reason"]
    assert finish in ("stop", "length"), finish
    for c in chunks[:-2]:
        assert c["choices"][0]["finish_reason"] is None
    n = usage["usage"]["completion_tokens"]
    assert 0 <= n <= max_tokens and (finish != "length" or n == max_tokens), (finish, n, max_tokens)
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + n
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pocket", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--leak-kb", type=int, default=10 * 1024)
    a = ap.parse_args()

    lock = threading.Lock()
    state = {"next": 0, "done": 0, "tokens": 0, "errors": [], "rss_100": None}
    with PocketServer(a.pocket, a.model, "-p", str(a.slots), "--queue", str(a.clients), "-c", "256") as srv:

        def client(idx):
            rng = random.Random(idx)
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
            while True:
                with lock:
                    if state["next"] >= a.requests:
                        break
                    i = state["next"]
                    state["next"] += 1
                chat = i % 2 == 0
                max_tokens = rng.choice([1, 8, 16, 32])
                prompt = rng.choice(PROMPTS)
                req = {"model": "m", "stream": True, "max_tokens": max_tokens, "temperature": 0.8, "seed": i}
                if chat:
                    req["messages"] = [{"role": "user", "content": prompt}]
                else:
                    req["prompt"] = prompt
                path = "/v1/chat/completions" if chat else "/v1/completions"
                try:
                    conn.request("POST", path, body=json.dumps(req), headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    body = r.read().decode()
                    assert r.status == 200, f"status {r.status}: {body[:200]}"
                    n = check_stream(body, max_tokens, chat)
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    with lock:
                        state["errors"].append(f"request {i}: {type(e).__name__}: {e}")
                    conn.close()
                    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
                    continue
                with lock:
                    state["done"] += 1
                    state["tokens"] += n
                    if state["done"] == 100:
                        state["rss_100"] = srv.rss_kb()
            conn.close()

        t0 = time.time()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.time() - t0
        rss_end = srv.rss_kb()

        def ok_count(m):
            return sum(m.get(f'pocket_http_responses_total{{endpoint="{ep}",status="200"}}', 0)
                       for ep in ("/v1/chat/completions", "/v1/completions"))

        # The server counts a response once it is fully sent, which can be
        # just after the client has read its last byte: allow a moment.
        give_up = time.time() + 5
        m = srv.metrics()
        while ok_count(m) < a.requests and time.time() < give_up:
            time.sleep(0.05)
            m = srv.metrics()
        # Likewise a slot is freed just after its last chunk is sent: wait
        # (within the same moment) for the server to be idle.
        health = srv.health()
        while (health["slots_busy"] != 0 or health["queued"] != 0) and time.time() < give_up:
            time.sleep(0.05)
            health = srv.health()

    errors = state["errors"]
    rows = m["pocket_decode_rows_total"] / max(1, m["pocket_decode_steps_total"])
    print(f"load: {state['done']}/{a.requests} requests ok from {a.clients} concurrent streaming clients, "
          f"{a.slots} slots, in {seconds:.1f} s; {state['tokens']} tokens ({state['tokens'] / seconds:.0f} tok/s), "
          f"mean decode batch {rows:.2f}; RSS after 100 requests {state['rss_100'] / 1024:.1f} MB, "
          f"at the end {rss_end / 1024:.1f} MB")
    for e in errors[:10]:
        print("load: FAILED", e)
    ok = not errors and state["done"] == a.requests
    if health["slots_busy"] != 0 or health["queued"] != 0:
        print("load: FAILED: slots still busy or queued after the run:", health)
        ok = False
    if state["rss_100"] is not None and rss_end - state["rss_100"] > a.leak_kb:
        print(f"load: FAILED: RSS grew by {(rss_end - state['rss_100']) / 1024:.1f} MB after the first 100 requests")
        ok = False
    if ok_count(m) != a.requests:
        print(f"load: FAILED: the server counted {ok_count(m):.0f} 200 responses for {a.requests} requests sent")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
