"""Weights in files small enough for the device run's return path, and back.

The device run may bring back at most 8 files of at most 16 MiB each, and one
safetensors tensor cannot be split by save_pretrained(max_shard_size=...): the
64K x 256 f16 embedding alone is 33 MB. So train.py writes every model of a run
(target, plain draft, DFlash draft) as f16 tensors named `<model>/<name>` into
pack-NN.safetensors files of at most MAX_BYTES each, splitting a tensor that is
too large into row blocks named `<model>/<name>#<k>` (rows concatenated in k
order on load). configs.json beside them holds each model's config dict.

unpack() returns {model: {name: tensor}}; export.py turns that into the Hugging
Face folders, the z-lab DFlash folder and the GGUF.
"""
import glob
import json
import os
import re

import torch
from safetensors.torch import load_file, save_file

MAX_BYTES = 15_000_000
HEADER_SLACK = 64 * 1024  # safetensors JSON header, generous


def _pieces(models):
    """(name, tensor) pieces, each under the byte limit, in a fixed order."""
    budget = MAX_BYTES - HEADER_SLACK
    for model, tensors in models.items():
        for name in sorted(tensors):
            t = tensors[name].detach().to("cpu").contiguous()
            key = f"{model}/{name}"
            nbytes = t.numel() * t.element_size()
            if nbytes <= budget or t.dim() == 0:
                yield key, t
                continue
            row_bytes = nbytes // t.shape[0]
            rows = max(1, budget // row_bytes)
            for k, start in enumerate(range(0, t.shape[0], rows)):
                yield f"{key}#{k}", t[start:start + rows].clone()


def pack(models, configs, out_dir, dtype=torch.float16):
    """Write models ({model: {name: tensor}}) as pack-NN.safetensors + configs.json."""
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "pack-*.safetensors")):
        os.remove(old)
    files, cur, cur_bytes = [], {}, 0
    for key, t in _pieces({m: {n: v.to(dtype) if v.is_floating_point() else v for n, v in ts.items()}
                           for m, ts in models.items()}):
        nbytes = t.numel() * t.element_size()
        if cur and cur_bytes + nbytes > MAX_BYTES - HEADER_SLACK:
            files.append(cur)
            cur, cur_bytes = {}, 0
        cur[key] = t
        cur_bytes += nbytes
    if cur:
        files.append(cur)
    paths = []
    for i, f in enumerate(files):
        path = os.path.join(out_dir, f"pack-{i:02d}.safetensors")
        save_file(f, path, metadata={"format": "pt", "pocket_pack": f"{i + 1}/{len(files)}"})
        assert os.path.getsize(path) <= MAX_BYTES, path
        paths.append(path)
    with open(os.path.join(out_dir, "configs.json"), "w", encoding="utf-8") as f:
        json.dump(configs, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return paths


def unpack(in_dir):
    """({model: {name: tensor}}, configs) from a folder written by pack()."""
    parts = {}
    for path in sorted(glob.glob(os.path.join(in_dir, "pack-*.safetensors"))):
        for key, t in load_file(path).items():
            m = re.fullmatch(r"(.*)#(\d+)", key)
            base, k = (m.group(1), int(m.group(2))) if m else (key, None)
            parts.setdefault(base, []).append((k, t))
    models = {}
    for base, pieces in parts.items():
        model, name = base.split("/", 1)
        if pieces[0][0] is None:
            t = pieces[0][1]
        else:
            t = torch.cat([p for _, p in sorted(pieces, key=lambda kp: kp[0])], dim=0)
        models.setdefault(model, {})[name] = t
    with open(os.path.join(in_dir, "configs.json"), encoding="utf-8") as f:
        configs = json.load(f)
    return models, configs
