#!/usr/bin/env python3
"""transformers' Gemma 3 as an independent reference for Pocket's Gemma 3
forward: the GGUF's tensors are dequantized with `gguf`, written as a
Hugging Face folder with `safetensors` (norm weights back to HF's
convention: the GGUF stores 1 + w), loaded as Gemma3ForCausalLM in float32
with eager attention, and run on token ids; the top-k logits of every
position go to a JSON file that tests/model/test_gemma3.cpp compares with
Pocket's float reference forward (ReferenceModel) and its fast forward.

Needs torch (not in tools/oracles/requirements.txt: the CPU build is not on
PyPI, and the default one pulls several GB of CUDA libraries), so it runs in
a scratch virtual environment, not in CI; the output is committed as
tests/data/gemma3/transformers_reference.json.

usage: gemma3_transformers_reference.py MODEL.gguf CASES.json HF_DIR OUT.json
CASES: the llama.cpp reference (tools/oracles/llama_reference.cpp output);
its prompt ids are the inputs; the first --head and last --tail positions of
each prompt are kept (long prompts cross the 512-position sliding window).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.numpy import save_file


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    blk, i, rest = name.split(".", 2)
    assert blk == "blk"
    m = {
        "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
        "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
        "attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
        "ffn_norm.weight": "pre_feedforward_layernorm.weight", "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }[rest]
    return f"model.layers.{i}.{m}"


def field(r, key):
    f = r.fields[key]
    return f.parts[f.data[0]][0] if len(f.data) == 1 else None


def write_folder(gguf_path, out_dir):
    r = GGUFReader(gguf_path)
    a = "gemma3"
    tensors = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape.tolist())])  # GGUF lists the row length first
        if t.name.endswith("norm.weight"):
            w = w - 1.0  # Gemma3RMSNorm multiplies by (1 + w)
        tensors[hf_name(t.name)] = np.ascontiguousarray(w)
    cfg = dict(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
        vocab_size=int(tensors["model.embed_tokens.weight"].shape[0]),
        hidden_size=int(field(r, f"{a}.embedding_length")), intermediate_size=int(field(r, f"{a}.feed_forward_length")),
        num_hidden_layers=int(field(r, f"{a}.block_count")), num_attention_heads=int(field(r, f"{a}.attention.head_count")),
        num_key_value_heads=int(field(r, f"{a}.attention.head_count_kv")), head_dim=int(field(r, f"{a}.attention.key_length")),
        rms_norm_eps=float(field(r, f"{a}.attention.layer_norm_rms_epsilon")), rope_theta=float(field(r, f"{a}.rope.freq_base")),
        rope_local_base_freq=10000.0, sliding_window=int(field(r, f"{a}.attention.sliding_window")), sliding_window_pattern=6,
        query_pre_attn_scalar=int(field(r, f"{a}.attention.key_length")), max_position_embeddings=int(field(r, f"{a}.context_length")),
        hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None, attn_logit_softcapping=None, rope_scaling=None,
        tie_word_embeddings=True, torch_dtype="float32", bos_token_id=2, eos_token_id=1, pad_token_id=0,
    )
    os.makedirs(out_dir, exist_ok=True)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("cases")
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--head", type=int, default=24)
    ap.add_argument("--tail", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=8)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.hf_dir, "model.safetensors")):
        write_folder(a.gguf, a.hf_dir)
    torch.set_num_threads(2)
    model = transformers.Gemma3ForCausalLM.from_pretrained(a.hf_dir, torch_dtype=torch.float32,
                                                          attn_implementation="eager").eval()
    with open(a.cases, encoding="utf-8") as f:
        cases = json.load(f)["generate"]
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": []}
    for c in cases:
        ids = c["prompt_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].numpy()
        positions = sorted(set(range(min(a.head, len(ids)))) | set(range(max(0, len(ids) - a.tail), len(ids))))
        top = []
        for p in positions:
            order = np.argsort(-logits[p], kind="stable")[: a.top_k]
            top.append([[int(i), float(logits[p][i])] for i in order])
        out["cases"].append({"ids": ids, "positions": positions, "top": top})
    with open(a.out + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(a.out + ".tmp", a.out)
    print(f"{a.out}: {len(out['cases'])} prompts, transformers {transformers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
