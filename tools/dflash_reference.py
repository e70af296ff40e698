#!/usr/bin/env python3
"""Float64 reference of DFlash and DFlash2 block drafts in numpy: an oracle
that shares no code with Pocket's C++ (scripts/oracles.sh runs it for the
DFlashLive gtests).

Reads a target model (a Pocket file or plain GGUF of a Qwen3 shape, f32/f16
weights) with `gguf`; makes a random-weight DFlash and a DFlash2 draft for
it, each written twice: in z-lab's folder layout (config.json and
model.safetensors, the safetensors container written here by hand) and in
llama.cpp's GGUF form (written by `gguf`, the library llama.cpp's converter
uses: general.architecture "dflash", 1-based dflash.target_layers, the mask
token as tokenizer.ggml.mask_token_id; once more with the matrices in Q8_0,
quantized by gguf). Then, for a few random prompts, runs
the target's own forward (for the hidden states the draft reads: the outputs
of the chosen target layers, the last one after the final norm) and the
draft's: context = hidden_norm(fc(taps)); the block [anchor, mask x (B-1)]
through Qwen3 layers whose queries attend to [context; block] without a
causal mask; DFlash2's grouped dynamic causal convolution around attention
and the MLP; the final norm and the target's head (output_multiplier and
final_logit_softcapping applied); DFlash2's candidate selector on the rows.
Writes OUT_DIR/expected.json: per draft and prompt the block's logits, the
drafted tokens and each row's score margin (near ties may go either way).

usage: dflash_reference.py TARGET.gguf OUT_DIR [--seed N]
"""
import argparse
import json
import os
import struct

import gguf
import numpy as np


def read_target(path):
    r = gguf.GGUFReader(path)
    arch = r.fields["general.architecture"].contents()

    def key(name, default=None):
        f = r.fields.get(f"{arch}.{name}")
        return default if f is None else f.contents()

    w = {t.name: np.asarray(t.data, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)]) for t in r.tensors}
    cfg = {
        "dim": key("embedding_length"), "layers": key("block_count"), "heads": key("attention.head_count"),
        "kv_heads": key("attention.head_count_kv"), "eps": key("attention.layer_norm_rms_epsilon"),
        "theta": key("rope.freq_base", 10000.0),
    }
    cfg["head_dim"] = key("attention.key_length", cfg["dim"] // cfg["heads"])
    cfg["vocab"] = w["token_embd.weight"].shape[0]
    return cfg, w


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, positions, theta):
    """x: [n, heads, hd]; rotates the first and second halves (NeoX / Qwen3)."""
    hd = x.shape[-1]
    inv = theta ** (-2.0 * np.arange(hd // 2) / hd)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def attention(q, k, v, causal):
    """q: [n, heads, hd], k/v: [m, kv_heads, hd]; GQA, queries at the last n keys when causal."""
    n, heads, hd = q.shape
    group = heads // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("nhd,mhd->hnm", q, k) / np.sqrt(hd)
    if causal:
        m = k.shape[0]
        s = np.where(np.arange(m)[None, :] > (m - n + np.arange(n))[:, None], -np.inf, s)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return np.einsum("hnm,mhd->nhd", s, v).reshape(n, heads * hd)


def target_taps(cfg, w, tokens, layer_ids):
    """The residual stream after each layer in layer_ids, the last layer's after the final norm: [n, taps*H]."""
    hd, eps = cfg["head_dim"], cfg["eps"]
    x = w["token_embd.weight"][tokens]
    n = len(tokens)
    taps = {}
    for l in range(cfg["layers"]):
        p = f"blk.{l}."
        h = rmsnorm(x, w[p + "attn_norm.weight"], eps)
        q = rmsnorm((h @ w[p + "attn_q.weight"].T).reshape(n, -1, hd), w[p + "attn_q_norm.weight"], eps)
        k = rmsnorm((h @ w[p + "attn_k.weight"].T).reshape(n, -1, hd), w[p + "attn_k_norm.weight"], eps)
        v = (h @ w[p + "attn_v.weight"].T).reshape(n, -1, hd)
        pos = np.arange(n)
        x = x + attention(rope(q, pos, cfg["theta"]), rope(k, pos, cfg["theta"]), v, True) @ w[p + "attn_output.weight"].T
        h = rmsnorm(x, w[p + "ffn_norm.weight"], eps)
        g, u = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
        taps[l] = rmsnorm(x, w["output_norm.weight"], eps) if l == cfg["layers"] - 1 else x
    return np.concatenate([taps[l] for l in layer_ids], axis=-1)


def make_draft(rng, H, vocab, d):
    """Random weights in z-lab's names; d: the draft's shape."""
    def u(shape, scale, offset=0.0):
        return (offset + rng.uniform(-scale, scale, size=shape)).astype(np.float32)

    q, kv = d["heads"] * d["hd"], d["kv_heads"] * d["hd"]
    t = {"fc.weight": u((H, H * len(d["taps"])), 0.15), "hidden_norm.weight": u((H,), 0.2, 1.0),
         "norm.weight": u((H,), 0.2, 1.0)}
    for l in range(d["layers"]):
        p = f"layers.{l}."
        t.update({
            p + "self_attn.q_proj.weight": u((q, H), 0.3), p + "self_attn.k_proj.weight": u((kv, H), 0.3),
            p + "self_attn.v_proj.weight": u((kv, H), 0.2), p + "self_attn.o_proj.weight": u((H, q), 0.2),
            p + "mlp.gate_proj.weight": u((d["ffn"], H), 0.2), p + "mlp.up_proj.weight": u((d["ffn"], H), 0.2),
            p + "mlp.down_proj.weight": u((H, d["ffn"]), 0.15),
            p + "input_layernorm.weight": u((H,), 0.2, 1.0), p + "post_attention_layernorm.weight": u((H,), 0.2, 1.0),
            p + "self_attn.q_norm.weight": u((d["hd"],), 0.2, 1.0), p + "self_attn.k_norm.weight": u((d["hd"],), 0.2, 1.0),
        })
        if d.get("conv_kernel_size"):
            K, groups = d["conv_kernel_size"], H // d["conv_group_size"]
            for conv in ("attention_conv.", "mlp_conv."):
                t[p + conv + "base_kernel"] = u((2, K, H), 0.5, 0.3)
                t[p + conv + "kernel_projection.weight"] = u((2 * K * groups, H), 0.1)
    if d.get("conv_kernel_size"):
        r = d["selector_rank"]
        t["candidate_selector.predecessor_codebook"] = u((vocab, r), 1.0)
        t["candidate_selector.successor_codebook"] = u((vocab, r), 1.0)
        t["candidate_selector.hidden_projection.weight"] = u((r, H), 0.3)
    return t


def write_folder(path, H, d, tensors):
    os.makedirs(path, exist_ok=True)
    dc = {"mask_token_id": d["mask"], "target_layer_ids": d["taps"]}
    for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k", "output_multiplier",
              "final_logit_softcapping"):
        if k in d:
            dc[k] = d[k]
    cfg = {"architectures": ["DFlash2DraftModel" if "conv_kernel_size" in d else "DFlashDraftModel"],
           "hidden_size": H, "intermediate_size": d["ffn"], "num_hidden_layers": d["layers"],
           "num_attention_heads": d["heads"], "num_key_value_heads": d["kv_heads"], "head_dim": d["hd"],
           "rms_norm_eps": 1e-6, "rope_theta": 1e6, "block_size": d["block"], "dflash_config": dc}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(path, "model.safetensors"), tensors)


def write_safetensors(path, tensors):
    """The safetensors container (8-byte header length, JSON header, data), every tensor f32."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


LLAMA_LAYER = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
               "mlp.down_proj.weight": "ffn_down.weight", "attention_conv.base_kernel": "attn_conv_base",
               "attention_conv.kernel_projection.weight": "attn_conv_proj.weight",
               "mlp_conv.base_kernel": "ffn_conv_base", "mlp_conv.kernel_projection.weight": "ffn_conv_proj.weight"}
LLAMA_GLOBAL = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight",
                "norm.weight": "output_norm.weight",
                "candidate_selector.predecessor_codebook": "selector_predecessor.weight",
                "candidate_selector.successor_codebook": "selector_successor.weight",
                "candidate_selector.hidden_projection.weight": "selector_hidden.weight"}


def write_gguf(path, H, d, tensors, qtype=None):
    """qtype (e.g. Q8_0): the matrices whose rows are whole blocks, quantized by gguf's own code."""
    w = gguf.GGUFWriter(path, "dflash")
    for k, v in (("embedding_length", H), ("feed_forward_length", d["ffn"]), ("block_count", d["layers"]),
                 ("attention.head_count", d["heads"]), ("attention.head_count_kv", d["kv_heads"]),
                 ("attention.key_length", d["hd"]), ("attention.value_length", d["hd"]), ("block_size", d["block"])):
        w.add_uint32(f"dflash.{k}", v)
    w.add_float32("dflash.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32("dflash.rope.freq_base", 1e6)
    w.add_uint32("tokenizer.ggml.mask_token_id", d["mask"])
    w.add_array("dflash.target_layers", [i + 1 for i in d["taps"]])
    for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
        if k in d:
            w.add_uint32(f"dflash.{k}", d[k])
    if "output_multiplier" in d:
        w.add_float32("dflash.logit_scale", d["output_multiplier"])
    if "final_logit_softcapping" in d:
        w.add_float32("dflash.final_logit_softcapping", d["final_logit_softcapping"])
    for name, a in tensors.items():
        if name in LLAMA_GLOBAL:
            out = LLAMA_GLOBAL[name]
        else:
            _, l, rest = name.split(".", 2)
            out = f"blk.{l}.{LLAMA_LAYER[rest]}"
        block = gguf.GGML_QUANT_SIZES[qtype][0] if qtype is not None else 0
        if qtype is not None and a.ndim == 2 and a.shape[1] % block == 0:
            w.add_tensor(out, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(out, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def conv(t, d, name, x, dyn, side):
    """DFlash2's causal conv of block rows x [B, H] with coefficients dyn [B, 2, K, groups] on `side`."""
    K, gs = d["conv_kernel_size"], d["conv_group_size"]
    base = t[name + "base_kernel"].astype(np.float64)[side]  # [K, H]
    coef = np.repeat(dyn[:, side], gs, axis=-1)  # [B, K, H]
    y = np.zeros_like(x)
    for tap in range(min(K, x.shape[0])):
        shifted = np.concatenate([np.zeros((tap, x.shape[1])), x[: x.shape[0] - tap]], axis=0)
        y += (base[tap][None, :] + coef[:, tap]) * shifted
    return y


def draft_forward(t, d, tw, tcfg, taps, anchor):
    """Logits [B-1, V] and final-normed hidden states [B-1, H] of block rows 1..B-1."""
    f = {k: v.astype(np.float64) for k, v in t.items()}
    H, B, hd, eps, theta = tcfg["dim"], d["block"], d["hd"], 1e-6, 1e6
    a = taps.shape[0]
    ctx = rmsnorm(taps @ f["fc.weight"].T, f["hidden_norm.weight"], eps)
    h = tw["token_embd.weight"][[anchor] + [d["mask"]] * (B - 1)].copy()
    dflash2 = "conv_kernel_size" in d
    groups = H // d["conv_group_size"] if dflash2 else 0
    for l in range(d["layers"]):
        p = f"layers.{l}."

        def sublayer(norm, conv_name, fn):
            x = rmsnorm(h, f[p + norm], eps)
            dyn = None
            if dflash2:
                dyn = (x @ f[p + conv_name + "kernel_projection.weight"].T).reshape(B, 2, d["conv_kernel_size"], groups)
                x = conv(t, d, p + conv_name, x, dyn, 0)
            y = fn(x)
            return conv(t, d, p + conv_name, y, dyn, 1) if dflash2 else y

        def attn(x):
            q = rmsnorm((x @ f[p + "self_attn.q_proj.weight"].T).reshape(B, -1, hd), f[p + "self_attn.q_norm.weight"], eps)
            src = np.concatenate([ctx, x], axis=0)
            k = rmsnorm((src @ f[p + "self_attn.k_proj.weight"].T).reshape(a + B, -1, hd),
                        f[p + "self_attn.k_norm.weight"], eps)
            v = (src @ f[p + "self_attn.v_proj.weight"].T).reshape(a + B, -1, hd)
            o = attention(rope(q, np.arange(a, a + B), theta), rope(k, np.arange(a + B), theta), v, False)
            return o @ f[p + "self_attn.o_proj.weight"].T

        def mlp(x):
            g, u = x @ f[p + "mlp.gate_proj.weight"].T, x @ f[p + "mlp.up_proj.weight"].T
            return (g / (1 + np.exp(-g)) * u) @ f[p + "mlp.down_proj.weight"].T

        h = h + sublayer("input_layernorm.weight", "attention_conv.", attn)
        h = h + sublayer("post_attention_layernorm.weight", "mlp_conv.", mlp)
    hidden = rmsnorm(h, f["norm.weight"], eps)[1:]
    head = tw.get("output.weight", tw["token_embd.weight"])
    z = hidden @ head.T * d.get("output_multiplier", 1.0)
    cap = d.get("final_logit_softcapping", 0.0)
    if cap > 0:
        z = cap * np.tanh(z / cap)
    return z, hidden


def select(t, d, z, hidden, anchor):
    """DFlash2's greedy walk: per row the top-k logits rescored by the bilinear term with the previous pick."""
    pred = t["candidate_selector.predecessor_codebook"].astype(np.float64)
    succ = t["candidate_selector.successor_codebook"].astype(np.float64)
    proj = hidden @ t["candidate_selector.hidden_projection.weight"].astype(np.float64).T
    k, prev, picks, margins = d["selector_top_k"], anchor, [], []
    for i in range(z.shape[0]):
        order = np.argsort(-z[i], kind="stable")
        score = z[i] + (pred[prev] * proj[i]) @ succ.T  # every token's score; only the top-k compete
        cand = order[:k]
        ranked = cand[np.argsort(-score[cand], kind="stable")]
        margin = score[ranked[0]] - score[ranked[1]] if k > 1 else np.inf
        if k < len(order) and z[i, order[k - 1]] - z[i, order[k]] < 0.01:
            margin = min(margin, score[ranked[0]] - score[order[k]])
        prev = int(ranked[0])
        picks.append(prev)
        margins.append(float(margin))
    return picks, margins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tcfg, tw = read_target(args.target)
    H, V = tcfg["dim"], tcfg["vocab"]
    rng = np.random.default_rng(args.seed)
    shape = {"layers": 2, "heads": 4, "kv_heads": 2, "hd": 16, "ffn": 96, "block": 6, "mask": V - 1,
             "taps": [0, tcfg["layers"] - 1]}
    drafts = {"dflash": dict(shape),
              "dflash2": dict(shape, conv_kernel_size=3, conv_group_size=8, selector_rank=8, selector_top_k=6,
                              output_multiplier=1.25, final_logit_softcapping=6.0)}
    os.makedirs(args.out, exist_ok=True)
    expected = {"target": os.path.abspath(args.target), "drafts": []}
    prompts = [rng.integers(0, V - 10, size=n).tolist() for n in (2, 7, 12)]
    for name, d in drafts.items():
        t = make_draft(rng, H, V, d)
        folder, gguf_path = os.path.join(args.out, name), os.path.join(args.out, name + ".gguf")
        write_folder(folder, H, d, t)
        write_gguf(gguf_path, H, d, t)
        q8_path = os.path.join(args.out, name + "-q8_0.gguf")
        write_gguf(q8_path, H, d, t, gguf.GGMLQuantizationType.Q8_0)
        cases = []
        for hist in prompts:
            taps = target_taps(tcfg, tw, hist[:-1], d["taps"])
            z, hidden = draft_forward(t, d, tw, tcfg, taps, hist[-1])
            if "conv_kernel_size" in d:
                picks, margins = select(t, d, z, hidden, hist[-1])
            else:
                srt = -np.sort(-z, axis=-1)
                picks, margins = np.argmax(z, axis=-1).tolist(), (srt[:, 0] - srt[:, 1]).tolist()
            cases.append({"history": hist, "logits": z.tolist(), "picks": picks, "margins": margins})
        expected["drafts"].append({"name": name, "folder": folder, "gguf": gguf_path, "gguf_q8_0": q8_path,
                                   "cases": cases})
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"dflash reference: {len(drafts)} drafts x {len(prompts)} prompts in {args.out}")


if __name__ == "__main__":
    main()
