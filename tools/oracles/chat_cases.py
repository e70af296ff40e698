#!/usr/bin/env python3
"""Renders chat conversations with Hugging Face `transformers`
(apply_chat_template: the model's own Jinja template, no torch needed) and
writes the text and the ids for the ChatLive gtest; with --golden, rewrites
the committed tests/data/chat/qwen3_golden.json from tests/data/chat/cases.json.

Live mode adds random conversations (a new seed each run, printed): system
prompts or not, several turns, assistant replies with and without <think>
blocks, Chinese, emoji, code, whitespace edge cases.

usage: chat_cases.py MODEL_DIR CASES_JSON OUT_JSON [--random N] [--seed S] [--golden]
"""
import argparse
import json
import os
import random
import sys
import time

import transformers

TEXTS = ["你好，介绍一下你自己。", "What is 2+2?", "Hi", "  leading and trailing spaces  ", "line one\nline two\n",
         "代码：```python\nprint('hi')\n```", "😀👍🏽 emoji", "", "\n", "多轮对话的第二个问题？", "Thanks!",
         "Tab\tseparated", "数学：1+1=2。", "A long answer. " * 20]
THOUGHTS = ["", "Let me think.", "先分析问题。\n然后回答。", "\n"]


def random_conversation(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(TEXTS)})
    for turn in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": rng.choice(TEXTS)})
        if turn + 1 < 4 and rng.random() < 0.7:
            reply = rng.choice(TEXTS)
            if rng.random() < 0.5:
                reply = "<think>" + rng.choice(THOUGHTS) + "</think>\n\n" + reply
            msgs.append({"role": "assistant", "content": reply})
    case = {"name": "random", "messages": msgs, "add_generation_prompt": msgs[-1]["role"] == "user"}
    if rng.random() < 0.7:
        case["enable_thinking"] = rng.random() < 0.5
    return case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--random", type=int, default=300)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--golden", action="store_true")
    a = ap.parse_args()
    transformers.logging.set_verbosity_error()
    tok = transformers.AutoTokenizer.from_pretrained(a.model_dir)
    with open(a.cases, encoding="utf-8") as f:
        cases = json.load(f)
    seed = a.seed if a.seed is not None else int(time.time())
    if not a.golden:
        rng = random.Random(seed)
        cases += [random_conversation(rng) for _ in range(a.random)]
    out = []
    for c in cases:
        kw = {"add_generation_prompt": c["add_generation_prompt"]}
        if "enable_thinking" in c:
            kw["enable_thinking"] = c["enable_thinking"]
        r = dict(c)
        r["rendered"] = tok.apply_chat_template(c["messages"], tokenize=False, **kw)
        if not a.golden:
            r["ids"] = tok.apply_chat_template(c["messages"], tokenize=True, **kw)
        out.append(r)
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        if a.golden:
            f.write(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
        else:
            json.dump({"transformers": transformers.__version__, "seed": seed, "cases": out}, f, ensure_ascii=False)
    os.replace(a.out + ".tmp", a.out)
    print(f"{a.out}: {len(out)} chat cases ({0 if a.golden else a.random} random, seed {seed}), "
          f"transformers {transformers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
