#!/usr/bin/env python3
"""Hugging Face's Gemma tokenizer, built from the vocabulary of a Gemma GGUF.

A GGUF keeps Gemma's SentencePiece vocabulary as tokenizer.ggml.{tokens,
scores,token_type}. This script turns those fields back into a SentencePiece
model (BPE, byte fallback, no dummy prefix, whitespace as U+2581, identity
normalizer: Gemma's settings) and lets transformers' own converter
(GemmaTokenizerFast from that model file) make the `tokenizers` JSON, so the
oracle's BPE, added-token and byte-fallback rules are Hugging Face's, not
ours. It also writes a corpus: the committed tokenizer corpus plus lines of
the shared Chinese and English held-out text (tools/corpus/make_corpus.py).

usage: gemma3_tokenizer.py GGUF OUT_DIR [--corpus JSON] [--heldout DIR] [--lines N]
writes OUT_DIR/tokenizer.json (for tokenizer_cases.py) and
       OUT_DIR/corpus.json
"""
import argparse
import json
import os
import random
import sys

from gguf import GGUFReader
from sentencepiece import sentencepiece_model_pb2 as spm_pb
from transformers import GemmaTokenizerFast

# SentencePiece piece types, the numbering GGUF's token_type also uses.
UNKNOWN = 2


def gguf_vocab(path):
    r = GGUFReader(path)

    def field(name):
        if name not in r.fields:
            sys.exit(f"gemma3_tokenizer: {path} has no {name}")
        return r.fields[name]

    if bytes(field("tokenizer.ggml.model").parts[-1]).decode() != "llama":
        sys.exit(f"gemma3_tokenizer: {path} is not a SentencePiece (tokenizer.ggml.model = llama) vocabulary")
    f = field("tokenizer.ggml.tokens")
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = field("tokenizer.ggml.scores")
    scores = [float(f.parts[i][0]) for i in f.data]
    f = field("tokenizer.ggml.token_type")
    types = [int(f.parts[i][0]) for i in f.data]

    def scalar(name):
        return int(field(name).parts[field(name).data[0]][0])

    ids = {k: scalar(f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos", "unknown", "padding")}
    return tokens, scores, types, ids


def spm_model(tokens, scores, types, ids):
    m = spm_pb.ModelProto()
    t = m.trainer_spec
    t.model_type = spm_pb.TrainerSpec.BPE
    t.vocab_size = len(tokens)
    t.byte_fallback = True
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = ids["unknown"], ids["bos"], ids["eos"], ids["padding"]
    n = m.normalizer_spec
    n.name = "identity"
    n.add_dummy_prefix = False
    n.remove_extra_whitespaces = False
    n.escape_whitespaces = True
    for i, (piece, score, kind) in enumerate(zip(tokens, scores, types)):
        p = m.pieces.add()
        p.piece, p.score = piece, score
        # llama.cpp's converter marks <unk> as a control token; SentencePiece
        # wants exactly one piece of type UNKNOWN.
        p.type = UNKNOWN if i == ids["unknown"] else kind
    return m.SerializeToString()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "../.."))
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--corpus", default=os.path.join(root, "tests/data/tokenizer/corpus.json"))
    ap.add_argument("--heldout", default=os.path.join(root, "build/corpus"))
    ap.add_argument("--lines", type=int, default=1500, help="held-out lines per language")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model_path = os.path.join(a.out, "gemma3.spm.model")
    with open(model_path, "wb") as f:
        f.write(spm_model(*gguf_vocab(a.gguf)))
    tok = GemmaTokenizerFast(vocab_file=model_path, add_bos_token=False, add_eos_token=False)
    tok.backend_tokenizer.save(os.path.join(a.out, "tokenizer.json"))

    with open(a.corpus, encoding="utf-8") as f:
        texts = json.load(f)
    rng = random.Random(1)  # a fixed sample: the random strings come from tokenizer_cases.py
    for lang in ("zh", "en"):
        path = os.path.join(a.heldout, f"heldout_{lang}.txt")
        if not os.path.exists(path):
            sys.exit(f"gemma3_tokenizer: {path} is missing (run tools/corpus/make_corpus.py)")
        with open(path, encoding="utf-8") as f:
            lines = [l for l in f.read().split("\n") if l]
        texts += rng.sample(lines, min(a.lines, len(lines)))
    with open(os.path.join(a.out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    print(f"{a.out}: Gemma tokenizer.json from {os.path.basename(a.gguf)} "
          f"({len(tok)} tokens), corpus of {len(texts)} strings")


if __name__ == "__main__":
    main()
