#!/usr/bin/env python3
"""libpocket.so exports exactly the C API: every dynamic symbol it defines is
a pocket_* function declared in pocket_c.h, every declared function is
exported, and the soname is libpocket.so.<POCKET_ABI_VERSION>."""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--nm", required=True)
ap.add_argument("--objdump", required=True)
ap.add_argument("--header", required=True)
ap.add_argument("--soname", required=True)
ap.add_argument("lib")
a = ap.parse_args()

header = open(a.header, encoding="utf-8").read()
declared = set(re.findall(r"POCKET_API\s[^;]*?\b(pocket_[a-z0-9_]+)\s*\(", header))
if len(declared) < 10:
    sys.exit(f"only {len(declared)} functions found in {a.header}: the declaration pattern is out of date")

out = subprocess.run([a.nm, "-D", "--defined-only", a.lib], check=True, capture_output=True, text=True).stdout
exported = {}
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    kind, name = parts[1], parts[2].split("@")[0]
    exported[name] = kind
# The version node itself shows up as an absolute symbol (kind A).
names = {n for n, k in exported.items() if k != "A"}
failures = []
stray = sorted(n for n in names if not n.startswith("pocket_"))
if stray:
    failures.append(f"{len(stray)} exported symbols are not pocket_*: {', '.join(stray[:20])}")
undeclared = sorted(n for n in names if n.startswith("pocket_") and n not in declared)
if undeclared:
    failures.append("exported but not declared in pocket_c.h: " + ", ".join(undeclared))
missing = sorted(declared - names)
if missing:
    failures.append("declared in pocket_c.h but not exported: " + ", ".join(missing))
not_functions = sorted(n for n in names if exported[n] != "T")
if not_functions:
    failures.append("exported symbols that are not functions: " + ", ".join(not_functions))

dyn = subprocess.run([a.objdump, "-p", a.lib], check=True, capture_output=True, text=True).stdout
m = re.search(r"^\s*SONAME\s+(\S+)", dyn, re.M)
if not m:
    failures.append(f"{a.lib} has no SONAME")
elif m.group(1) != a.soname:
    failures.append(f"SONAME is {m.group(1)}, expected {a.soname}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"{len(names)} pocket_* functions exported, nothing else; SONAME {a.soname}")
