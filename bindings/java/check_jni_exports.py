#!/usr/bin/env python3
"""A JNI library of the Java binding exports exactly the native methods that
dev.pocket.NativeLib declares (Java_dev_pocket_NativeLib_<name>) and nothing
else: no libpocket or C++ symbol leaks out of the self-contained one, and no
declared method is missing (which would fail only when first called).
    check_jni_exports.py --nm NM NativeLib.java LIB..."""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--nm", required=True)
ap.add_argument("java")
ap.add_argument("libs", nargs="+")
a = ap.parse_args()

source = open(a.java, encoding="utf-8").read()
declared = {f"Java_dev_pocket_NativeLib_{n}" for n in re.findall(r"\bstatic native [\w\[\]]+ (\w+)\(", source)}
if len(declared) < 10:
    sys.exit(f"only {len(declared)} native methods found in {a.java}: the pattern is out of date")
failures = []
for lib in a.libs:
    out = subprocess.run([a.nm, "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = {p[2].split("@")[0] for p in (line.split() for line in out.splitlines()) if len(p) >= 3 and p[1] != "A"}
    if names - declared:
        failures.append(f"{lib}: exports {len(names - declared)} other symbols: {', '.join(sorted(names - declared)[:20])}")
    if declared - names:
        failures.append(f"{lib}: declared native but not exported: {', '.join(sorted(declared - names))}")
    if not failures:
        print(f"{lib}: exactly the {len(declared)} native methods of NativeLib")
if failures:
    print("\n".join(failures))
    sys.exit(1)
