#!/usr/bin/env python3
"""Writes GGUF files the way users' files are written, with `gguf` (the
library llama.cpp's converters use), for the GgufLive gtests: a small
Qwen3-shaped model whose special-token ids are -1 (0xFFFFFFFF), metadata of
every value type, a custom alignment, tensors in F32/F16/Q8_0/Q4_0 quantized
by gguf's own code, and a big-endian file that must be rejected. Next to
them, expected.json holds what the reader must find: the config, and for
each weight its values as gguf itself dequantizes them (first rows).

usage: gguf_files.py GPT2_STYLE_TOKENIZER_JSON OUT_DIR
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

DIM, HIDDEN, LAYERS, HEADS, KV, HEAD_DIM = 64, 96, 2, 4, 2, 16


def vocab_of(tokenizer_json):
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    n = max(vocab.values()) + 1
    for a in tj.get("added_tokens", []):
        n = max(n, a["id"] + 1)
    tokens = [""] * n
    types = [gguf.TokenType.UNUSED] * n
    for piece, i in vocab.items():
        tokens[i], types[i] = piece, gguf.TokenType.NORMAL
    for a in tj.get("added_tokens", []):
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tokens, types, merges


def weights(rng, vocab_size):
    w = {"token_embd.weight": (vocab_size, DIM), "output_norm.weight": (DIM,)}
    for l in range(LAYERS):
        b = f"blk.{l}."
        w.update({b + "attn_norm.weight": (DIM,), b + "ffn_norm.weight": (DIM,),
                  b + "attn_q.weight": (HEADS * HEAD_DIM, DIM), b + "attn_k.weight": (KV * HEAD_DIM, DIM),
                  b + "attn_v.weight": (KV * HEAD_DIM, DIM), b + "attn_output.weight": (DIM, HEADS * HEAD_DIM),
                  b + "attn_q_norm.weight": (HEAD_DIM,), b + "attn_k_norm.weight": (HEAD_DIM,),
                  b + "ffn_gate.weight": (HIDDEN, DIM), b + "ffn_up.weight": (HIDDEN, DIM),
                  b + "ffn_down.weight": (DIM, HIDDEN)})
    return {k: (rng.standard_normal(shape) * (0.02 if len(shape) == 2 else 1.0)).astype(np.float32)
            for k, shape in w.items()}


def write(path, tokens, types, merges, ws, qtype, alignment=None, endian=gguf.GGUFEndian.LITTLE, extra=True):
    wr = gguf.GGUFWriter(path, "qwen3", endianess=endian)
    wr.add_name("pocket oracle test")
    wr.add_context_length(256)
    wr.add_embedding_length(DIM)
    wr.add_feed_forward_length(HIDDEN)
    wr.add_block_count(LAYERS)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV)
    wr.add_key_length(HEAD_DIM)
    wr.add_value_length(HEAD_DIM)
    wr.add_rope_freq_base(1000000.0)
    wr.add_layer_norm_rms_eps(1e-6)
    if alignment:
        wr.add_custom_alignment(alignment)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("qwen2")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    eos = tokens.index("<|endoftext|>") if "<|endoftext|>" in tokens else 0
    wr.add_eos_token_id(eos)
    wr.add_bos_token_id(0xFFFFFFFF)      # llama.cpp's converters: "no such token"
    wr.add_pad_token_id(0xFFFFFFFF)
    wr.add_add_bos_token(False)
    if extra:  # metadata of every value type, as converters and fine-tuning tools add
        wr.add_uint8("test.u8", 200)
        wr.add_int8("test.i8", -100)
        wr.add_uint16("test.u16", 60000)
        wr.add_int16("test.i16", -30000)
        wr.add_int32("test.i32", -2000000000)
        wr.add_uint64("test.u64", 2 ** 40)
        wr.add_int64("test.i64", -(2 ** 40))
        wr.add_float64("test.f64", 2.5)
        wr.add_bool("test.bool", True)
        wr.add_string("test.string", "中文 ünïcode 😀")
        wr.add_array("test.int_array", [1, 2, 3])
        wr.add_array("test.string_array", ["a", "bb", "中"])
        wr.add_array("test.nested_array", [[1, 2], [3]])
    expected = {}
    for name, arr in ws.items():
        t = qtype if arr.ndim == 2 else Q.F32
        if t == Q.F32:
            data, deq = arr.copy(), arr
        elif t == Q.F16:
            data = arr.astype(np.float16)
            deq = data.astype(np.float32)
        else:
            data = gguf.quants.quantize(arr, t)
            deq = gguf.quants.dequantize(data, t)
        wr.add_tensor(name, data, raw_dtype=t if t not in (Q.F32, Q.F16) else None)
        rows = deq.reshape(-1, deq.shape[-1])[:3]
        expected[name] = {"type": t.name, "shape": list(arr.shape), "rows": rows.astype(float).tolist()}
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return expected


def main():
    tok_json, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tokens, types, merges = vocab_of(tok_json)
    ws = weights(np.random.default_rng(3), len(tokens))
    expected = {"vocab_size": len(tokens), "eos": tokens.index("<|endoftext|>"), "files": {}}
    for name, qtype, align in [("f32", Q.F32, None), ("f16_align64", Q.F16, 64), ("q8_0", Q.Q8_0, None),
                               ("q4_0_align256", Q.Q4_0, 256)]:
        expected["files"][name] = {"alignment": align or 32,
                                   "tensors": write(f"{out}/{name}.gguf", tokens, types, merges, ws, qtype, align)}
    write(f"{out}/big_endian.gguf", tokens, types, merges, ws, Q.F32, endian=gguf.GGUFEndian.BIG, extra=False)
    with open(f"{out}/expected.json", "w") as f:
        json.dump(expected, f)
    print(f"{out}: {len(expected['files']) + 1} GGUF files written by gguf-py")


if __name__ == "__main__":
    main()
