#!/usr/bin/env bash
# `pocket serve` from the outside (test.sh stage "oracles"): the bounded load
# test (64 concurrent streaming clients, 1,000 requests, well-formed streams,
# no memory growth; Python stdlib only), then the official `openai` client
# (pinned in tools/server/requirements.txt, a venv in build/server-venv)
# against a live server: generation, streaming, stop strings, errors, the API
# key, disconnects, structured output (response_format json_schema and
# json_object, each output validated by the pinned `jsonschema` package) and
# the docs' examples. Without PyPI the client tests say
# so and are skipped; the C++ server tests (release stage) still ran.
#   scripts/server_check.sh BUILD_DIR     (BUILD_DIR holds pocket)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
model="$root/../shared/models/stories260K.bin"
venv="$root/build/server-venv"
req="$root/tools/server/requirements.txt"
py=/usr/bin/python3
[[ -x "$py" ]] || py="$(command -v python3)"

if ! "$build/pocket" serve --help >/dev/null 2>&1; then
  echo "server: SKIPPED: $build/pocket has no serve command (built without cpp-httplib)"
  exit 0
fi
"$py" "$root/tools/server/load_test.py" --pocket "$build/pocket" --model "$model"

source "$root/scripts/lib.sh"
if ! pinned_venv "$venv" "$req"; then
  echo "server: SKIPPED: could not install tools/server/requirements.txt from PyPI (no network?);"
  echo "server: the openai client tests did not run"
  exit 0
fi
"$venv/bin/python" "$root/tools/server/openai_client_test.py" --pocket "$build/pocket" --model "$model"
