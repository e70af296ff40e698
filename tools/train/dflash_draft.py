"""A DFlash-style block draft, written for this project from the published format.

Format (z-lab's DFlash checkpoints, as their public model code loads them):
safetensors tensors

  fc.weight                       [H, n_fused * H]   fuses the chosen target layers' outputs
  hidden_norm.weight              [H]                RMSNorm after fc
  layers.{i}.input_layernorm.weight, layers.{i}.post_attention_layernorm.weight
  layers.{i}.self_attn.{q,k,v,o}_proj.weight, layers.{i}.self_attn.{q,k}_norm.weight
  layers.{i}.mlp.{gate,up,down}_proj.weight
  norm.weight                     [H]                final RMSNorm; logits = target's lm_head(norm(h))

and a Qwen3 config.json with architectures ["DFlashDraftModel"], num_hidden_layers
(the draft's), num_target_layers, block_size and dflash_config {target_layer_ids,
mask_token_id}. No embedding and no head: both are the target's.

Computation: ctx = hidden_norm(fc(concat(h_l for l in target_layer_ids))) where h_l
is the output of target layer l (hidden_states[l + 1] in transformers). A block is
[anchor token, mask x (B-1)] embedded with the target's embedding at positions
a..a+B-1. In every layer the block's queries (q_norm, RoPE) attend, without a
causal mask, to keys/values k_proj/v_proj of ctx at every position < a and of the
block itself (k_norm, RoPE); input_layernorm applies to the block stream only. The
outputs at block positions 1..B-1 are the draft's guesses for those positions.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def build_target_layer_ids(num_target_layers, n):
    """Evenly spaced target layers from 1 to L-3 (z-lab's default spacing)."""
    if n == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return sorted({int(round(start + i * (end - start) / (n - 1))) for i in range(n)})


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope(x, pos, theta):
    """Rotate-half RoPE (Qwen/NeoX style). x [b, h, n, d], pos [b, n]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    f = pos.float()[:, None, :, None] * inv  # [b, 1, n, d/2]
    cos, sin = torch.cat([f, f], -1).cos(), torch.cat([f, f], -1).sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], -1)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim, eps):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)


class MLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, hidden, ffn, heads, kv_heads, head_dim, eps):
        super().__init__()
        self.self_attn = Attention(hidden, heads, kv_heads, head_dim, eps)
        self.mlp = MLP(hidden, ffn)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)


class DFlashDraft(nn.Module):
    def __init__(self, hidden, ffn, layers, heads, kv_heads, head_dim, n_fused, rope_theta, eps):
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, ffn, heads, kv_heads, head_dim, eps) for _ in range(layers))
        self.norm = RMSNorm(hidden, eps)
        self.fc = nn.Linear(n_fused * hidden, hidden, bias=False)
        self.hidden_norm = RMSNorm(hidden, eps)
        self.rope_theta = rope_theta
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, noise, fused, qpos, anchors, block):
        """noise [b, nb*B, H] block embeddings, fused [b, T, n*H] target states for positions 0..T-1,
        qpos [b, nb*B] block positions, anchors [b, nb] first position of each block."""
        b, q_len, _ = noise.shape
        T = fused.shape[1]
        dev = noise.device
        ctx = self.hidden_norm(self.fc(fused.to(self.fc.weight.dtype)))
        kpos = torch.cat([torch.arange(T, device=dev).expand(b, T), qpos], dim=1)
        # mask [b, 1, Q, T + Q]: context keys before the block's anchor, keys of the same block
        blk_id = torch.arange(q_len, device=dev) // block
        anc_q = anchors.repeat_interleave(block, dim=1)  # [b, Q]
        ctx_ok = torch.arange(T, device=dev)[None, None, :] < anc_q[:, :, None]
        same = (blk_id[:, None] == blk_id[None, :]).expand(b, q_len, q_len)
        mask = torch.cat([ctx_ok, same], dim=2)[:, None]
        h = noise
        for layer in self.layers:
            a = layer.self_attn
            x = layer.input_layernorm(h)
            q = a.q_norm(a.q_proj(x).view(b, q_len, a.heads, a.head_dim)).transpose(1, 2)
            k = torch.cat([a.k_proj(ctx), a.k_proj(x)], 1).view(b, T + q_len, a.kv_heads, a.head_dim)
            v = torch.cat([a.v_proj(ctx), a.v_proj(x)], 1).view(b, T + q_len, a.kv_heads, a.head_dim)
            k = a.k_norm(k).transpose(1, 2)
            v = v.transpose(1, 2)
            q, k = rope(q, qpos, self.rope_theta), rope(k, kpos, self.rope_theta)
            rep = a.heads // a.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            o = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), attn_mask=mask,
                                               scale=a.head_dim ** -0.5)
            h = h + a.o_proj(o.transpose(1, 2).reshape(b, q_len, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.norm(h)

    def zlab_config(self, tcfg, target_layer_ids, block_size, mask_token_id):
        cfg = tcfg.to_dict()
        cfg.update({
            "num_hidden_layers": len(self.layers),
            "layer_types": ["full_attention"] * len(self.layers),
            "num_target_layers": tcfg.num_hidden_layers,
            "block_size": block_size,
            "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(target_layer_ids)},
        })
        return clean_config(cfg)


ZLAB_KEYS = (
    "architectures", "auto_map", "model_type", "attention_bias", "attention_dropout", "head_dim", "hidden_act",
    "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings", "max_window_layers",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_scaling", "rope_theta",
    "sliding_window", "use_sliding_window", "tie_word_embeddings", "use_cache", "vocab_size", "layer_types",
    "bos_token_id", "eos_token_id", "pad_token_id", "num_target_layers", "block_size", "dflash_config", "torch_dtype",
)


def clean_config(cfg):
    """A z-lab style config.json: the Qwen3 keys a DFlash loader reads, nothing of
    PretrainedConfig's generation defaults."""
    cfg = dict(cfg)
    if "rope_theta" not in cfg:
        cfg["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    cfg.setdefault("rope_scaling", None)
    cfg.update({"architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
                "model_type": "qwen3", "torch_dtype": "float16"})
    return {k: cfg[k] for k in ZLAB_KEYS if k in cfg}
