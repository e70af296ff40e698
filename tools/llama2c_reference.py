#!/usr/bin/env python3
"""Independent oracle for the stories260K golden test: a direct, pure-Python
port of the llama2.c forward pass (float64, no dependencies), reading the
checkpoint and tok512.bin itself. Writes tests/data/model/stories260k_greedy.json:
the greedy continuation of "Once upon a time" (BOS + llama2.c's encoding).

Usage: python3 tools/llama2c_reference.py ../shared/models/stories260K.bin \
           ../shared/models/tok512.bin tests/data/model/stories260k_greedy.json
"""
import json
import math
import struct
import sys

model_path, tok_path, out_path = sys.argv[1:4]
N_NEW = 100
PROMPT_IDS = [1, 403, 407, 261, 378]  # <s> "Once" " upon" " a" " time" (llama2.c encode)

data = open(model_path, "rb").read()
dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("7i", data[:28])
vocab = abs(vocab)
hs = dim // n_heads
kv_dim = n_kv * hs
pos_ = 28


def take(n):
    global pos_
    v = struct.unpack("%df" % n, data[pos_:pos_ + 4 * n])
    pos_ += 4 * n
    return v


emb = take(vocab * dim)
rms_att = take(n_layers * dim)
wq = take(n_layers * dim * dim)
wk = take(n_layers * dim * kv_dim)
wv = take(n_layers * dim * kv_dim)
wo = take(n_layers * dim * dim)
rms_ffn = take(n_layers * dim)
w1 = take(n_layers * dim * hidden)
w2 = take(n_layers * hidden * dim)
w3 = take(n_layers * dim * hidden)
rms_final = take(dim)


def matvec(w, off, x, n, d):
    return [sum(w[off + i * n + j] * x[j] for j in range(n)) for i in range(d)]


def rmsnorm(x, w, off):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + 1e-5)
    return [w[off + i] * s * x[i] for i in range(len(x))]


k_cache = [[] for _ in range(n_layers)]
v_cache = [[] for _ in range(n_layers)]


def forward(tok, pos):
    x = list(emb[tok * dim:(tok + 1) * dim])
    for l in range(n_layers):
        xb = rmsnorm(x, rms_att, l * dim)
        q = matvec(wq, l * dim * dim, xb, dim, dim)
        k = matvec(wk, l * dim * kv_dim, xb, dim, kv_dim)
        v = matvec(wv, l * dim * kv_dim, xb, dim, kv_dim)
        for i in range(0, dim, 2):  # RoPE on adjacent pairs, as run.c
            freq = 1.0 / (10000.0 ** ((i % hs) / hs))
            c, s = math.cos(pos * freq), math.sin(pos * freq)
            for vec in ([q, k] if i < kv_dim else [q]):
                a, b = vec[i], vec[i + 1]
                vec[i], vec[i + 1] = a * c - b * s, a * s + b * c
        k_cache[l].append(k)
        v_cache[l].append(v)
        att = [0.0] * dim
        for h in range(n_heads):
            kh = h // (n_heads // n_kv)
            sc = [sum(q[h * hs + i] * k_cache[l][t][kh * hs + i] for i in range(hs)) / math.sqrt(hs)
                  for t in range(pos + 1)]
            m = max(sc)
            e = [math.exp(s - m) for s in sc]
            z = sum(e)
            for i in range(hs):
                att[h * hs + i] = sum(e[t] / z * v_cache[l][t][kh * hs + i] for t in range(pos + 1))
        o = matvec(wo, l * dim * dim, att, dim, dim)
        x = [a + b for a, b in zip(x, o)]
        xb = rmsnorm(x, rms_ffn, l * dim)
        g = matvec(w1, l * dim * hidden, xb, dim, hidden)
        u = matvec(w3, l * dim * hidden, xb, dim, hidden)
        hb = [a / (1.0 + math.exp(-a)) * b for a, b in zip(g, u)]
        o = matvec(w2, l * hidden * dim, hb, hidden, dim)
        x = [a + b for a, b in zip(x, o)]
    x = rmsnorm(x, rms_final, 0)
    return matvec(emb, 0, x, dim, vocab)


tok = open(tok_path, "rb").read()
pieces, off = [], 4
for _ in range(vocab):
    _, n = struct.unpack("fi", tok[off:off + 8])
    pieces.append(tok[off + 8:off + 8 + n])
    off += 8 + n

out = []
for p in range(len(PROMPT_IDS) + N_NEW - 1):
    logits = forward(PROMPT_IDS[p] if p < len(PROMPT_IDS) else out[-1], p)
    if p >= len(PROMPT_IDS) - 1:
        out.append(max(range(vocab), key=lambda i: logits[i]))


def piece_bytes(i):  # byte-fallback tokens <0xNN> stand for one raw byte
    p = pieces[i]
    return bytes([int(p[3:5], 16)]) if len(p) == 6 and p.startswith(b"<0x") else p


text = b"".join(piece_bytes(i) for i in out).decode("utf-8")
json.dump({"prompt": "Once upon a time", "prompt_ids": PROMPT_IDS, "ids": out, "text": text},
          open(out_path, "w"), ensure_ascii=False, indent=1)
print(text)
