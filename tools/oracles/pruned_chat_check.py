#!/usr/bin/env python3
"""Guarantee (4) of vocabulary pruning with the real chat template: Hugging Face
`transformers` renders every conversation of a chat case file (written by
chat_cases.py, random ones included) with the original tokenizer folder and
with the folder `pocket prune-vocab` wrote. The rendered text must be the same,
and wherever the original ids are all kept, the pruned ids must be the original
ones mapped through vocab_map.json; special tokens must map to themselves.

usage: pruned_chat_check.py ORIGINAL_DIR PRUNED_DIR CHAT_CASES_JSON
"""
import json
import sys

import transformers


def main():
    original_dir, pruned_dir, cases_path = sys.argv[1:4]
    transformers.logging.set_verbosity_error()
    a = transformers.AutoTokenizer.from_pretrained(original_dir)
    b = transformers.AutoTokenizer.from_pretrained(pruned_dir)
    with open(pruned_dir + "/vocab_map.json", encoding="utf-8") as f:
        old_to_new = json.load(f)["old_to_new"]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bad = []
    for tok_text, old in a.get_added_vocab().items():
        if b.convert_tokens_to_ids(tok_text) != old_to_new[old]:
            bad.append(f"added token {tok_text!r}: {old} -> {b.convert_tokens_to_ids(tok_text)}, map says {old_to_new[old]}")
    compared = 0
    for c in cases:
        kw = {"add_generation_prompt": c["add_generation_prompt"]}
        if "enable_thinking" in c:
            kw["enable_thinking"] = c["enable_thinking"]
        text_a = a.apply_chat_template(c["messages"], tokenize=False, **kw)
        text_b = b.apply_chat_template(c["messages"], tokenize=False, **kw)
        if text_a != text_b:
            bad.append(f"rendered text differs: {c['messages']!r}")
            continue
        ids_a = a.apply_chat_template(c["messages"], tokenize=True, **kw)
        ids_b = b.apply_chat_template(c["messages"], tokenize=True, **kw)
        mapped = [old_to_new[i] for i in ids_a]
        if min(mapped) < 0:
            continue  # message text with pruned tokens legitimately encodes differently
        compared += 1
        if mapped != ids_b:
            bad.append(f"ids differ: {c['messages']!r}")
    print(f"pruned chat check: {len(cases)} conversations, {compared} with only kept tokens compared id for id, "
          f"{len(bad)} problems (transformers {transformers.__version__})")
    for line in bad[:5]:
        print("  " + line)
    if bad or compared < len(cases) // 4:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
