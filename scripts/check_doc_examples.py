#!/usr/bin/env python3
"""Checks that every code block of a doc page marked with
<!-- example: PATH --> (on the line before the opening fence) is exactly the
file PATH of the repository, which the tests build and run; so the page's
copy-paste examples cannot drift from tested code.
    check_doc_examples.py ROOT DOC.md... [--min N]   (N: at least N marked blocks in all)
"""
import argparse
import pathlib
import re
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=pathlib.Path)
    ap.add_argument("docs", type=pathlib.Path, nargs="+")
    ap.add_argument("--min", type=int, default=1)
    args = ap.parse_args()
    failures = checked = 0
    for doc in args.docs:
        text = doc.read_text(encoding="utf-8")
        for path, body in re.findall(r"<!-- example: (\S+) -->\n```[a-z]*\n(.*?)```\n", text, flags=re.S):
            checked += 1
            f = args.root / path
            if not f.is_file():
                print(f"{doc}: example {path}: no such file")
                failures += 1
            elif f.read_text(encoding="utf-8") != body:
                print(f"{doc}: the block marked {path} differs from the file (copy the file into the page)")
                failures += 1
            else:
                print(f"{doc}: {path}: same as the file")
    if checked < args.min:
        print(f"{checked} marked examples, expected at least {args.min}")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
