#!/usr/bin/env python3
"""Write a Hugging Face Qwen3 folder as an f16 GGUF with the `gguf` package.

Keys and tensor names follow llama.cpp's converter for the qwen3 architecture:
qwen3.* hyper-parameters, a gpt2 (byte-level BPE) tokenizer with pre-tokenizer
"qwen2", ids without a token padded as [PAD<i>] (UNUSED) up to the embedding's
row count, special added tokens CONTROL and other added tokens USER_DEFINED, the
chat template from tokenizer_config.json, no bos, eos/pad from config.json;
2-D weights f16, norms f32, no output.weight (tied embeddings).

  python3 tools/train/gguf_export.py FOLDER OUT.gguf
"""
import json
import os
import sys

import gguf
import numpy as np
from safetensors.numpy import load_file

NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module>.<proj>.weight
    n, mod = parts[2], ".".join(parts[3:-1])
    return f"blk.{n}.{NAMES[mod]}.weight"


def vocab(folder, n_rows):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tokens = [f"[PAD{i}]" for i in range(n_rows)]
    types = [gguf.TokenType.UNUSED] * n_rows
    for piece, i in tj["model"]["vocab"].items():
        tokens[i], types[i] = piece, gguf.TokenType.NORMAL
    for a in tj.get("added_tokens", []):
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tokens, types, merges


def write_gguf(folder, path, name="pocket-mini"):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    tensors = {}
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(folder, fn)))
    if cfg.get("tie_word_embeddings", True):
        tensors.pop("lm_head.weight", None)
    n_rows = tensors["model.embed_tokens.weight"].shape[0]
    tokens, types, merges = vocab(folder, n_rows)
    rope_theta = cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0))

    wr = gguf.GGUFWriter(path, "qwen3")
    wr.add_name(name)
    wr.add_context_length(cfg["max_position_embeddings"])
    wr.add_embedding_length(cfg["hidden_size"])
    wr.add_feed_forward_length(cfg["intermediate_size"])
    wr.add_block_count(cfg["num_hidden_layers"])
    wr.add_head_count(cfg["num_attention_heads"])
    wr.add_head_count_kv(cfg["num_key_value_heads"])
    wr.add_key_length(cfg["head_dim"])
    wr.add_value_length(cfg["head_dim"])
    wr.add_rope_freq_base(float(rope_theta))
    wr.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("qwen2")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    wr.add_eos_token_id(eos)
    wr.add_pad_token_id(cfg.get("pad_token_id", eos) if cfg.get("pad_token_id") is not None else eos)
    wr.add_add_bos_token(False)
    tc_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(tc_path):
        with open(tc_path, encoding="utf-8") as f:
            tmpl = json.load(f).get("chat_template")
        if tmpl:
            wr.add_chat_template(tmpl)
    for hf in sorted(tensors, key=lambda k: (k.count("layers"), k)):
        arr = tensors[hf]
        data = arr.astype(np.float16) if arr.ndim == 2 else arr.astype(np.float32)
        wr.add_tensor(gguf_name(hf), data)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


if __name__ == "__main__":
    write_gguf(sys.argv[1], sys.argv[2])
    print(sys.argv[2])
