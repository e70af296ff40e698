#!/usr/bin/env python3
"""Writes a GGUF whose 2-D weights are llama.cpp Q4_K (Q4_K_M-like) from an
f16/f32 GGUF, for benchmarks of Pocket's K-quant paths where llama.cpp's own
quantizer is not built (bench/vs_llama.sh builds it; this needs only numpy and
gguf from PyPI). Not llama.cpp's quantizer: a plain min/max fit per 32-element
sub-block, 6-bit sub-block scales and mins under fp16 super-block scales, the
byte layout written from the format description. Matrices whose width is not
a multiple of 256 become Q8_0, as do the token embedding and output head
(llama.cpp's Q4_K_M keeps those at 6-8 bits).

  pocket create pocket-0.3b --weights f16 --embed f16 syn.pocket
  pocket quantize syn.pocket syn-f16.gguf --format gguf --weights f16 --embed f16
  python bench/make_q4k_gguf.py syn-f16.gguf syn-q4k.gguf
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT


def q4_k(x):
    """x: (rows, cols) float32, cols % 256 == 0 -> (rows, cols // 256 * 144) uint8."""
    rows, cols = x.shape
    sb = x.reshape(rows, cols // 256, 8, 32).astype(np.float32)
    lo = np.minimum(sb.min(axis=3), 0.0)
    hi = np.maximum(sb.max(axis=3), 0.0)
    scale = (hi - lo) / 15.0          # per sub-block
    minv = -lo                        # >= 0
    d = scale.max(axis=2) / 63.0      # per super-block
    dmin = minv.max(axis=2) / 63.0
    d16, dmin16 = d.astype(np.float16), dmin.astype(np.float16)
    df, dminf = d16.astype(np.float32), dmin16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[..., None] > 0, np.rint(scale / df[..., None]), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dminf[..., None] > 0, np.rint(minv / dminf[..., None]), 0).clip(0, 63).astype(np.uint8)
        step = df[..., None] * sc
        off = dminf[..., None] * m
        q = np.where(step[..., None] > 0, np.rint((sb + off[..., None]) / step[..., None]), 0).clip(0, 15).astype(np.uint8)
    # Twelve bytes of (scale, min) pairs: pairs 0-3 in the low 6 bits of bytes
    # 0-3 / 4-7; pairs 4-7 low nibbles in bytes 8-11, top 2 bits in bytes 0-7.
    s = np.zeros(sc.shape[:2] + (12,), np.uint8)
    s[..., 0:4] = sc[..., 0:4] | ((sc[..., 4:8] >> 4) << 6)
    s[..., 4:8] = m[..., 0:4] | ((m[..., 4:8] >> 4) << 6)
    s[..., 8:12] = (sc[..., 4:8] & 15) | ((m[..., 4:8] & 15) << 4)
    # Codes: 32 bytes per pair of sub-blocks, the even one in the low nibbles.
    qs = (q[:, :, 0::2, :] | (q[:, :, 1::2, :] << 4)).reshape(rows, cols // 256, 128)
    blk = np.concatenate([d16.view(np.uint8).reshape(rows, -1, 2), dmin16.view(np.uint8).reshape(rows, -1, 2), s, qs], axis=2)
    return blk.reshape(rows, -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    a = ap.parse_args()
    r = gguf.GGUFReader(a.input)
    arch = r.fields["general.architecture"].contents()
    tmp = a.output + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(f.types) > 1 else None
        value = f.contents()
        if vtype == gguf.GGUFValueType.ARRAY and len(value) == 0:
            continue  # gguf-py refuses to write an empty array; readers treat it as absent
        w.add_key_value(name, value, vtype, sub)
    counts = {}
    for t in r.tensors:
        data = np.array(t.data)
        shape = [int(v) for v in reversed(t.shape)]  # rows first
        if t.tensor_type in (QT.F16, QT.F32) and len(shape) == 2:
            x = data.astype(np.float32).reshape(shape)
            big = t.name in ("token_embd.weight", "output.weight")
            if shape[1] % 256 == 0 and not big:
                w.add_tensor(t.name, q4_k(x), raw_dtype=QT.Q4_K)
                counts["Q4_K"] = counts.get("Q4_K", 0) + 1
            else:
                w.add_tensor(t.name, gguf.quants.quantize(x, QT.Q8_0), raw_dtype=QT.Q8_0)
                counts["Q8_0"] = counts.get("Q8_0", 0) + 1
        else:
            w.add_tensor(t.name, data.reshape(shape), raw_dtype=t.tensor_type)
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.output)
    print(f"{a.output}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), file=sys.stderr)


if __name__ == "__main__":
    main()
