#!/usr/bin/env bash
# Installs what Pocket needs to build and test, from Debian packages only.
# Skips apt entirely when everything is already installed.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev
          libgtest-dev googletest libbenchmark-dev
          g++-aarch64-linux-gnu qemu-user)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
