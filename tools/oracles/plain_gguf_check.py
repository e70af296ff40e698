#!/usr/bin/env python3
"""Checks with gguf (PyPI, llama.cpp's GGUF library) that a plain GGUF written by
`pocket quantize --format gguf` is what other engines expect: no pocket.* keys,
llama.cpp's default alignment, the tokenizer as tokenizer.ggml.* metadata with
one token per vocabulary entry, and every tensor of the source Pocket file
(F16/F32, which gguf reads too) present with the same shape, type and bytes.

    plain_gguf_check.py SOURCE.pocket PLAIN.gguf
Exits non-zero with a message naming the first difference."""
import sys
from importlib import metadata

import numpy as np
from gguf import GGUFReader


def field_value(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    part = f.parts[f.data[0]]
    return bytes(part).decode() if f.types[0].name == "STRING" else part[0]


def main():
    src, out = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
    keys = list(out.fields)
    pocket_keys = [k for k in keys if k.startswith("pocket.")]
    if pocket_keys:
        sys.exit(f"plain GGUF has Pocket keys: {pocket_keys}")
    alignment = field_value(out, "general.alignment")
    if alignment not in (None, 32):
        sys.exit(f"general.alignment = {alignment}, llama.cpp's quantizer writes 32")
    arch = field_value(out, "general.architecture")
    vocab = field_value(out, f"{arch}.vocab_size")
    tokens = out.fields["tokenizer.ggml.tokens"]
    if len(tokens.data) != vocab:
        sys.exit(f"{len(tokens.data)} tokens for a vocabulary of {vocab}")
    if field_value(out, "tokenizer.ggml.model") not in ("gpt2", "llama"):
        sys.exit("tokenizer.ggml.model is missing or unknown")
    theirs = {t.name: t for t in out.tensors}
    for t in src.tensors:
        o = theirs.get(t.name)
        if o is None:
            sys.exit(f"tensor {t.name} is missing")
        if o.tensor_type != t.tensor_type or list(o.shape) != list(t.shape):
            sys.exit(f"tensor {t.name}: {o.tensor_type.name} {list(o.shape)} vs {t.tensor_type.name} {list(t.shape)}")
        if not np.array_equal(np.asarray(o.data), np.asarray(t.data)):
            sys.exit(f"tensor {t.name}: the bytes differ")
    print(f"{sys.argv[2]}: {len(src.tensors)} tensors identical to the source, {vocab} tokens, "
          f"{len(keys)} keys, none pocket.*; read by gguf {metadata.version('gguf')}")


if __name__ == "__main__":
    main()
