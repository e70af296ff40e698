#!/usr/bin/env python3
"""Pocket's JSON Schema token masks side by side with xgrammar and llguidance.

Same schemas (the test corpus), same tokenizer.json, one run. For each
schema: compile time in each engine; then a token walk (llguidance picks a
random allowed token at each step, seeded, up to --steps tokens, ending at
end-of-sequence when the schema is complete) is replayed through xgrammar
and Pocket (bench/bench_constrain_masks), timing each mask and comparing the
three masks bit by bit over the ordinary tokens (special/added tokens are
left out of the comparison: each engine has its own end-of-sequence set).
Then keyword probes: a schema using one keyword and an instance that breaks
it; an engine either refuses the schema (error), enforces the keyword (the
instance is rejected), or ignores it (the instance is accepted).

All three produce compact JSON (no whitespace between tokens): Pocket's
default, llguidance with whitespace_flexible false, xgrammar with
any_whitespace false and separators (",", ":").

Setup: bench/constrain_peers.sh makes the pinned venv (tools/constrain/peer_requirements.txt)
and runs this on both vocabularies; by hand:
  python3 -m venv build/peers-venv
  build/peers-venv/bin/pip install -r tools/constrain/peer_requirements.txt
Run:
  build/peers-venv/bin/python tools/constrain/peer_bench.py \
      --tokenizer ../shared/tokenizers/qwen3/tokenizer.json \
      --pocket build/release/bench_constrain_masks --out build/peer_bench/qwen3
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np

# Each probe: (keyword, schema, an instance that violates the keyword only).
PROBES = [
    ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 1]),
    ("multipleOf", {"type": "integer", "multipleOf": 5}, 7),
    ("minProperties", {"type": "object", "minProperties": 1}, {}),
    ("patternProperties", {"type": "object", "patternProperties": {"^x": {"type": "integer"}},
                           "additionalProperties": False}, {"y": 1}),
    ("not", {"not": {"type": "integer"}}, 3),
    ("if/then", {"type": "integer", "if": {"minimum": 5}, "then": {"maximum": 7}}, 9),
    ("exclusiveMinimum", {"type": "integer", "exclusiveMinimum": 3}, 3),
    ("minimum (number)", {"type": "number", "minimum": 2.5}, 1.5),
    ("format: hostname", {"type": "string", "format": "hostname"}, "not a host!"),
    ("format: email", {"type": "string", "format": "email"}, "no-at-sign"),
    ("format: date", {"type": "string", "format": "date"}, "2024-13-45"),
    ("pattern", {"type": "string", "pattern": "^[a-z]{3}$"}, "abcd"),
    ("maxItems", {"type": "array", "maxItems": 1}, [1, 2]),
    ("maxLength", {"type": "string", "maxLength": 2}, "abc"),
    ("required", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, {}),
    ("additionalProperties: false", {"type": "object", "properties": {"a": {"type": "integer"}},
                                     "additionalProperties": False}, {"b": 1}),
    ("const", {"const": "x"}, "y"),
    ("contains", {"type": "array", "contains": {"const": 1}}, [2]),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}),
]


def load_vocab(path):
    """Token strings by id (byte-level form), the count, and the first added id."""
    t = json.load(open(path, encoding="utf-8"))
    n = 1 + max(max(t["model"]["vocab"].values()), max((a["id"] for a in t["added_tokens"]), default=-1))
    strs = [""] * n
    for s, i in t["model"]["vocab"].items():
        strs[i] = s
    for a in t["added_tokens"]:
        strs[a["id"]] = a["content"]
    first_added = min((a["id"] for a in t["added_tokens"]), default=n)
    return strs, n, first_added, {a["content"]: a["id"] for a in t["added_tokens"]}


def eos_ids(tokenizer_path, added):
    cfg = os.path.join(os.path.dirname(tokenizer_path), "tokenizer_config.json")
    eos = json.load(open(cfg)).get("eos_token") if os.path.exists(cfg) else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    return [added[eos]] if eos in added else []


def bits_of(words, n):
    """A little-endian bitmask (uint32 or uint64 words) as a bool array of n tokens."""
    return np.unpackbits(np.asarray(words).view(np.uint8), bitorder="little")[:n].astype(bool)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")


def dist(v):
    return {"n": len(v), "mean": statistics.fmean(v) if v else float("nan"), "median": pct(v, 0.5),
            "p90": pct(v, 0.9), "p99": pct(v, 0.99), "max": max(v) if v else float("nan")}


class Llg:
    name = "llguidance"

    def __init__(self, tok_json, n, eos):
        import llguidance
        self.mod = llguidance
        self.tok = llguidance.LLTokenizer(tok_json, n_vocab=n, eos_token=eos)
        self.buf = np.zeros((n + 31) // 32, dtype=np.uint32)

    def compile(self, schema_text):
        g = self.mod.LLMatcher.grammar_from_json_schema(schema_text, overrides={"whitespace_flexible": False})
        m = self.mod.LLMatcher(self.tok, g, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def mask(self, m):
        m.unsafe_compute_mask_ptr(self.buf.ctypes.data, self.buf.nbytes)
        return self.buf

    def advance(self, m, t):
        return m.consume_token(t) and not m.is_error()

    def accepting(self, m):
        return m.is_accepting()


class Xgr:
    name = "xgrammar"

    def __init__(self, strs, n, eos):
        import xgrammar as xgr
        self.xgr = xgr
        info = xgr.TokenizerInfo(strs, vocab_type=xgr.VocabType.BYTE_LEVEL, vocab_size=n, stop_token_ids=eos,
                                 add_prefix_space=False)
        self.compiler = xgr.GrammarCompiler(info, max_threads=2, cache_enabled=False)
        self.buf = xgr.allocate_token_bitmask(1, n)
        self.stop_id = eos[0]

    def compile(self, schema_text):
        c = self.compiler.compile_json_schema(schema_text, any_whitespace=False, separators=(",", ":"),
                                              strict_mode=True)
        return self.xgr.GrammarMatcher(c)

    def mask(self, m):
        m.fill_next_token_bitmask(self.buf)
        return self.buf[0].numpy()

    def advance(self, m, t):
        return m.accept_token(t)

    def accepting(self, m):
        return m.accept_token(self.stop_id)  # end-of-sequence is accepted only where the JSON is complete


def timed(f, *a):
    t0 = time.perf_counter_ns()
    r = f(*a)
    return r, (time.perf_counter_ns() - t0) / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json (tokenizer_config.json beside it names eos)")
    ap.add_argument("--schemas", default=os.path.join(os.path.dirname(__file__), "../../tests/data/constrain/schemas"))
    ap.add_argument("--pocket", required=True, help="bench_constrain_masks")
    ap.add_argument("--out", required=True, help="folder for walks, masks and results")
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--limit", type=int, default=0, help="only the first N schemas")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    strs, n, first_added, added = load_vocab(a.tokenizer)
    eos = eos_ids(a.tokenizer, added)
    tok_json = open(a.tokenizer, encoding="utf-8").read()
    t0 = time.perf_counter()
    llg = Llg(tok_json, n, eos)
    llg_init = time.perf_counter() - t0
    t0 = time.perf_counter()
    xg = Xgr(strs, n, eos)
    xgr_init = time.perf_counter() - t0
    names = sorted(f for f in os.listdir(a.schemas) if f.endswith(".json"))
    if a.limit:
        names = names[: a.limit]

    compile_ms = {"llguidance": [], "xgrammar": [], "pocket": []}
    mask_us = {"llguidance": [], "xgrammar": [], "pocket": []}
    errors = {"llguidance": {}, "xgrammar": {}, "pocket": {}}
    walks, masks = {}, {}
    for name in names:
        text = open(os.path.join(a.schemas, name), encoding="utf-8").read()
        rng = random.Random(f"{a.seed}:{name}")
        try:
            m, t = timed(llg.compile, text)
            compile_ms["llguidance"].append(t / 1000.0)
        except Exception as e:  # noqa: BLE001 - the engine's own error is the result
            errors["llguidance"][name] = str(e)[:200]
            continue
        walk, lm = [], []
        for _ in range(a.steps + 1):
            w, t = timed(llg.mask, m)
            mask_us["llguidance"].append(t)
            allowed = bits_of(w, n)
            lm.append(allowed.copy())
            ordinary = np.flatnonzero(allowed[:first_added])
            can_end = any(allowed[e] for e in eos)
            if len(ordinary) == 0 or (can_end and rng.random() < 0.3) or len(walk) == a.steps:
                break
            tok = int(ordinary[rng.randrange(len(ordinary))])
            walk.append(tok)
            if not llg.advance(m, tok):
                errors["llguidance"][name] = "its own allowed token rejected at step %d" % len(walk)
                break
        walks[name] = walk
        masks[name] = {"llguidance": lm}
        try:
            xm, t = timed(xg.compile, text)
            compile_ms["xgrammar"].append(t / 1000.0)
        except Exception as e:  # noqa: BLE001
            errors["xgrammar"][name] = str(e)[:200]
            continue
        xmask = []
        for i in range(len(walk) + 1):
            w, t = timed(xg.mask, xm)
            mask_us["xgrammar"].append(t)
            xmask.append(bits_of(w, n))
            if i == len(walk) or not xg.advance(xm, walk[i]):
                break
        masks[name]["xgrammar"] = xmask

    walks_path = os.path.join(a.out, "walks.json")
    json.dump(walks, open(walks_path, "w"))
    mask_dir = os.path.join(a.out, "pocket_masks")
    os.makedirs(mask_dir, exist_ok=True)
    pocket_json = os.path.join(a.out, "pocket.json")
    subprocess.run([a.pocket, a.tokenizer, a.schemas, walks_path, pocket_json, mask_dir], check=True)
    pk = json.load(open(pocket_json))
    words = (n + 63) // 64
    agree = {"steps": 0, "all_three": 0, "pocket_llg": 0, "pocket_xgr": 0, "llg_xgr": 0}
    disagreements = []
    for name, r in pk["schemas"].items():
        if "error" in r:
            errors["pocket"][name] = r["error"][:200]
            continue
        compile_ms["pocket"].append(r["compile_ms"])
        mask_us["pocket"].extend(r["mask_us"])
        raw = np.fromfile(os.path.join(mask_dir, name + ".bits"), dtype=np.uint64).reshape(-1, words)
        pm = [bits_of(row, n) for row in raw]
        lm, xm = masks[name]["llguidance"], masks[name].get("xgrammar", [])
        for i in range(min(len(pm), len(lm))):
            p, l = pm[i][:first_added], lm[i][:first_added]
            x = xm[i][:first_added] if i < len(xm) else None
            agree["steps"] += 1
            pl = np.array_equal(p, l)
            agree["pocket_llg"] += pl
            if x is not None:
                px, lx = np.array_equal(p, x), np.array_equal(l, x)
                agree["pocket_xgr"] += px
                agree["llg_xgr"] += lx
                agree["all_three"] += pl and px
            if not pl or (x is not None and not np.array_equal(p, x)):
                d = {"schema": name, "step": i, "prefix": bytes_of(llg, walks[name][:i])}
                for label, other in (("llguidance", l), ("xgrammar", x)):
                    if other is None:
                        continue
                    only_p, only_o = np.flatnonzero(p & ~other), np.flatnonzero(other & ~p)
                    if len(only_p) or len(only_o):
                        d["vs_" + label] = {"only_pocket": len(only_p), "only_" + label: len(only_o),
                                            "examples_only_pocket": [strs[t] for t in only_p[:5]],
                                            "examples_only_" + label: [strs[t] for t in only_o[:5]]}
                disagreements.append(d)

    probes = run_probes(a, llg, xg)
    summary = {
        "tokenizer": a.tokenizer, "vocab": n, "schemas": len(names), "steps_per_walk_max": a.steps,
        "init_s": {"llguidance_tokenizer": llg_init, "xgrammar_tokenizer": xgr_init,
                   "pocket_vocab_index": pk["vocab_index_ms"] / 1000.0},
        "compile_ms": {k: dist(v) for k, v in compile_ms.items()},
        "mask_us": {k: dist(v) for k, v in mask_us.items()},
        "errors": errors, "agreement": agree, "disagreements": disagreements[:50],
        "n_disagreements": len(disagreements), "probes": probes,
        "versions": versions(),
    }
    json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1, ensure_ascii=False)
    print_summary(summary)


def bytes_of(llg, toks):
    return llg.tok.decode_bytes(toks).decode("utf-8", "replace")


def run_probes(a, llg, xg):
    """Per keyword: error, enforced or ignored, for each engine."""
    out = {}
    pdir = os.path.join(a.out, "probes")
    os.makedirs(pdir, exist_ok=True)
    walks = {}
    for kw, schema, bad in PROBES:
        fname = "probe_" + "".join(c if c.isalnum() else "_" for c in kw) + ".json"
        text = json.dumps(schema)
        open(os.path.join(pdir, fname), "w").write(text)
        toks = llg.tok.tokenize_str(json.dumps(bad, separators=(",", ":")))
        walks[fname] = toks
        res = {}
        for eng in (llg, xg):
            try:
                m = eng.compile(text)
            except Exception as e:  # noqa: BLE001
                res[eng.name] = "error: " + str(e).splitlines()[0][:120]
                continue
            ok = all(eng.advance(m, t) for t in toks) and eng.accepting(m)
            res[eng.name] = "ignored (violating instance accepted)" if ok else "enforced"
        out[kw] = [fname, res]
    wpath = os.path.join(pdir, "walks.json")
    json.dump(walks, open(wpath, "w"))
    rpath = os.path.join(pdir, "pocket.json")
    subprocess.run([a.pocket, a.tokenizer, pdir, wpath, rpath], check=True)
    pk = json.load(open(rpath))["schemas"]
    for kw, (fname, res) in out.items():
        r = pk[fname]
        if "error" in r:
            res["pocket"] = "error: " + r["error"][:120]
        else:
            res["pocket"] = "ignored (violating instance accepted)" if r["rejected_at"] == -1 and r["accepting"] \
                else "enforced"
    return {kw: res for kw, (fname, res) in out.items()}


def versions():
    v = {}
    for mod in ("xgrammar", "llguidance", "torch"):
        try:
            from importlib.metadata import version
            v[mod] = version(mod)
        except Exception:  # noqa: BLE001
            v[mod] = "?"
    return v


def print_summary(s):
    print(f"tokenizer {s['tokenizer']} ({s['vocab']} tokens), {s['schemas']} schemas, versions {s['versions']}")
    print("| engine | compile median ms | compile max ms | schemas refused | mask mean us | median | p90 | p99 | max | masks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for e in ("pocket", "llguidance", "xgrammar"):
        c, m = s["compile_ms"][e], s["mask_us"][e]
        print(f"| {e} | {c['median']:.2f} | {c['max']:.2f} | {len(s['errors'][e])} | {m['mean']:.1f} | "
              f"{m['median']:.1f} | {m['p90']:.1f} | {m['p99']:.1f} | {m['max']:.1f} | {m['n']} |")
    print("init (s):", {k: round(v, 3) for k, v in s["init_s"].items()})
    print("agreement over ordinary tokens:", s["agreement"], "disagreeing steps:", s["n_disagreements"])
    for e, errs in s["errors"].items():
        for k, v in list(errs.items())[:10]:
            print(f"  {e} refused {k}: {v}")
    print("keyword probes:")
    for kw, res in s["probes"].items():
        print(f"  {kw}: " + "; ".join(f"{e} {r}" for e, r in res.items()))


if __name__ == "__main__":
    sys.exit(main())
