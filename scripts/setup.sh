#!/usr/bin/env bash
# Installs what Pocket needs to build and test, from Debian packages: one line
# on screen, apt's own output in build/logs/setup-apt.log (shown if it fails).
# Skips apt entirely when everything is already installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev
          libgtest-dev googletest libbenchmark-dev ccache python3 python3-venv
          g++-aarch64-linux-gnu qemu-user
          libcpp-httplib-dev          # pocket serve (src/server/http_server.cpp)
          default-jdk-headless python3-dev   # bindings/java (javac, jni.h), bindings/python (Python.h)
          clang libclang-rt-14-dev)   # libFuzzer (scripts/fuzz.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
((${#missing[@]})) || exit 0
mkdir -p "$root/build/logs"
log="$root/build/logs/setup-apt.log"
echo "setup: installing ${missing[*]} (log: build/logs/setup-apt.log)"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if ! { $sudo_cmd apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "setup: apt-get failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
