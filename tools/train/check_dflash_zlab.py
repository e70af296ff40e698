#!/usr/bin/env python3
"""Check an exported DFlash folder against z-lab's own model code (f32).

Loads FOLDER (model.safetensors + config.json, as export.py writes it) twice:
with z-lab's DFlashDraftModel (the public z-lab/dflash repository's
dflash/model.py, given by path; not part of this project) via from_pretrained,
and with tools/train/dflash.py. For random context states and blocks at several
anchors of one sequence, our multi-block training forward (one pass, block
mask) must match z-lab's forward run block by block (context = positions before
the anchor, no mask inside the block) to within 1e-4.

  python3 tools/train/check_dflash_zlab.py --zlab /path/to/dflash/repo FOLDER
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dflash_draft import DFlashDraft  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zlab", required=True, help="folder holding z-lab's dflash/ package")
    ap.add_argument("folder")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.zlab))
    from dflash.model import DFlashDraftModel  # z-lab's code
    from safetensors.torch import load_file

    torch.manual_seed(0)
    ref = DFlashDraftModel.from_pretrained(args.folder, attn_implementation="eager").float().eval()
    with open(os.path.join(args.folder, "config.json")) as f:
        cfg = json.load(f)
    ids = cfg["dflash_config"]["target_layer_ids"]
    B = cfg["block_size"]
    ours = DFlashDraft(hidden=cfg["hidden_size"], ffn=cfg["intermediate_size"], layers=cfg["num_hidden_layers"],
                       heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
                       head_dim=cfg["head_dim"], n_fused=len(ids), rope_theta=cfg["rope_theta"],
                       eps=cfg["rms_norm_eps"])
    sd = {k: v.float() for k, v in load_file(os.path.join(args.folder, "model.safetensors")).items()}
    ours.load_state_dict(sd, strict=True)
    ours.eval()
    assert ref.target_layer_ids == ids and ref.block_size == B

    H, T = cfg["hidden_size"], 48
    fused = torch.randn(1, T, len(ids) * H)
    anchors = torch.tensor([[3, 17, 30]])
    noise = torch.randn(1, anchors.shape[1] * B, H)
    qpos = (anchors[:, :, None] + torch.arange(B)).reshape(1, -1)
    with torch.no_grad():
        mine = ours(noise, fused, qpos, anchors, B)
        worst = 0.0
        for j, a in enumerate(anchors[0].tolist()):
            theirs = ref(target_hidden=fused[:, :a], noise_embedding=noise[:, j * B:(j + 1) * B],
                         position_ids=torch.arange(a + B)[None], past_key_values=None, use_cache=False,
                         is_causal=False)
            worst = max(worst, (theirs - mine[:, j * B:(j + 1) * B]).abs().max().item())
    print(f"check_dflash_zlab: {len(anchors[0])} blocks of {B}, max |diff| vs z-lab's DFlashDraftModel {worst:.2e}")
    if worst > 1e-4:
        sys.exit(1)


if __name__ == "__main__":
    main()
