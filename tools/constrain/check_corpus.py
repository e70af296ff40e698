#!/usr/bin/env python3
"""Generates with every schema of the corpus on the given models and seeds
(`pocket run --json-schema`) and validates each output with the jsonschema
package (Draft 2020-12, formats checked): an independent validator for the
oracles stage. Exit 1 on any output that does not parse or validate, or
that did not complete within the token budget.

  check_corpus.py POCKET SCHEMA_DIR MODEL [MODEL...] [--seeds 1 2 3] [-n 160]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import jsonschema


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pocket")
    ap.add_argument("schemas")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--temp", default="1.0")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.schemas, "*.json")))
    # The 2020-12 format checkers (FormatChecker() would mix in draft 3's
    # "time", which allows no offset).
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    bad, total, incomplete = 0, 0, 0
    for f in files:
        schema = json.load(open(f, encoding="utf-8"))
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        for model in a.models:
            for seed in a.seeds:
                cmd = [a.pocket, "run", "-m", model, "--json-schema", f, "-n", str(a.n), "--seed", str(seed),
                       "--temp", a.temp, "-q", "-t", "1"]
                p = subprocess.run(cmd, capture_output=True)
                total += 1
                out = p.stdout.decode("utf-8", "replace").rstrip("\n")
                where = f"{os.path.basename(f)} {os.path.basename(model)} seed {seed}"
                if p.returncode != 0:
                    print(f"FAIL {where}: exit {p.returncode}: {p.stderr.decode()[-300:]}")
                    bad += 1
                    continue
                if b"does not complete the constraint" in p.stderr:
                    incomplete += 1  # ran out of tokens: reported as such, nothing to validate
                    continue
                try:
                    value = json.loads(out)
                except ValueError as e:
                    print(f"FAIL {where}: not JSON ({e}): {out[:200]!r}")
                    bad += 1
                    continue
                errors = list(validator.iter_errors(value))
                if errors:
                    print(f"FAIL {where}: {errors[0].message[:200]} in {out[:200]!r}")
                    bad += 1
    print(f"constrain corpus: {total} outputs from {len(files)} schemas, {bad} invalid, "
          f"{incomplete} stopped by the token limit (reported incomplete)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
