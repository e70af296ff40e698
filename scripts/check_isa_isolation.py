#!/usr/bin/env python3
"""Checks that code compiled for a higher instruction-set level cannot be
reached before run-time detection selects that level.

Every translation unit named *_<isa>.cpp is compiled with that level's flags
(-mavx512f, -march=armv8.6-a+i8mm, ...). Two things would let its
instructions run on a CPU below the level:
  * a weak symbol (an inline function or template instantiation such as
    std::min<float> or std::vector<float>::resize) defined in such a unit: the
    linker keeps one copy of each weak symbol for the whole program, and may
    keep the one compiled for AVX-512 for callers in baseline code;
  * a global function other than the level's install_* entry point, which
    baseline code could call without going through detection.
So each ISA object may define global symbols only of the form
pocket::kernels::install_*, and no weak functions at all; everything else it
defines must be local (unnamed namespace or static) or weak data.

usage: check_isa_isolation.py [--nm NM] libpocket.a [more archives or objects]
Exits 1 listing every offending symbol, 0 when the archive is clean (and
says how many ISA objects it checked, so an empty check cannot pass).
"""
import argparse
import re
import subprocess
import sys

ISA_OBJECT = re.compile(r"_(avx2|avxvnni|avx512|avx512vbmi|amx|neon|dotprod|i8mm)\.cpp\.o(bj)?$")
ALLOWED_GLOBAL = re.compile(r"^pocket::kernels::install_[a-z0-9_]+\(")
# nm symbol types: lower case is local; W/w are weak functions (inline
# functions, template instantiations: code the linker merges across objects),
# T/D/B/R are strong globals. Weak objects (V/v) and GNU unique objects (u)
# are data, compiled the same for every level (such as the exception
# personality reference DW.ref.__gxx_personality_v0), so they are allowed.
WEAK_CODE_TYPES = set("Ww")
WEAK_DATA_TYPES = set("Vvu")


def defined_symbols(nm, path):
    out = subprocess.run([nm, "-C", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    member = path
    for line in out.splitlines():
        if not line.strip():
            continue
        if line.endswith(":") and not line.startswith(" "):
            member = line[:-1]
            continue
        parts = line.split(None, 2)
        if len(parts) == 3:
            yield member, parts[1], parts[2]
        elif len(parts) == 2:  # no address (absolute or common symbols)
            yield member, parts[0], parts[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nm", default="nm")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    problems, objects = [], set()
    for path in args.inputs:
        for member, kind, name in defined_symbols(args.nm, path):
            if not ISA_OBJECT.search(member):
                continue
            objects.add(member)
            if kind in WEAK_CODE_TYPES:
                problems.append(f"{member}: weak function {name!r} (type {kind}) may replace the baseline copy")
            elif kind in WEAK_DATA_TYPES:
                continue
            elif kind.isupper() and not ALLOWED_GLOBAL.match(name):
                problems.append(f"{member}: global symbol {name!r} (type {kind}) is reachable without detection")
    if not objects:
        print("check_isa_isolation: no *_<isa>.cpp objects found in " + " ".join(args.inputs), file=sys.stderr)
        return 1
    for p in problems:
        print("check_isa_isolation: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_isa_isolation: {len(objects)} ISA objects define only install_* entry points and local code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
