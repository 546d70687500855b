#!/usr/bin/env bash
# Installs what tilelab needs on Debian 12 (as root, or with sudo). Installs only what is missing,
# so a second run is quick. Everything comes from Debian's own packages.
set -euo pipefail
# Installed without recommends, so every package a build step or test calls is named here:
#   clang-19 + llvm-19 (its offload bundler calls llvm-objcopy) + lld-19: HIP for gfx942;
#   libclang-rt-19-dev: libFuzzer and the sanitizer runtimes of clang-19 (tests/fuzz);
#   clang-22 + llvm-22 + lld-22 (Debian 12's security archive): HIP for gfx950;
#   libamdhip64-dev + rocm-device-libs: the HIP headers and device libraries of the HIP build;
#   python3: the tests' JSON and CSV parsers.
#   libboost-context-dev: the CPU executor's fibers (executor/runtime.cpp).
pkgs=(build-essential cmake pkg-config libcairo2-dev libpango1.0-dev libjansson-dev libboost-context-dev
      libopenblas-dev liblapacke-dev libcmocka-dev fonts-dejavu-core
      clang-19 clang-tools-19 llvm-19 lld-19 libclang-rt-19-dev clang-22 llvm-22 lld-22 libamdhip64-dev rocm-device-libs python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all dependencies present"
