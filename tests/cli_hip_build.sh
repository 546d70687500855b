#!/usr/bin/env bash
# The HIP build path on Debian 12 packages, compiled and linked without a GPU
# (usage: cli_hip_build.sh TILELAB SRC; TILELAB is unused: this script builds its own):
#   configure -DTILELAB_GPU=hip -DCMAKE_HIP_ARCHITECTURES=gfx942 in a temporary folder, build the
#   `tilelab` target (host + gfx942 device code of kernels/*.hip, device link with lld-19 and the
#   ockl/hip bitcode of rocm-device-libs, host link against libamdhip64), then check that the
#   binary runs: `version` exits 0, `bench roofline` and `bench moe` say "no GPU" in one line and
#   exit 1, and `check moe` checks the CPU reference instead and says the GPU part was skipped.
# Skips, saying so, when clang++-19, ld.lld-19, libamdhip64-dev or rocm-device-libs is missing.
# Cost: about 70 s of wall time on two cores here (cmake 2 s, C library 10 s, the kernels/*.hip files
# (9: bench, roofline and the seven of the MoE kernel) the rest).
set -uo pipefail
src=$2
for need in clang++-19 ld.lld-19; do
  command -v "$need" >/dev/null || { echo "SKIPPED: $need not found"; exit 0; }
done
[ -f /usr/include/hip/hip_runtime.h ] || { echo "SKIPPED: libamdhip64-dev not installed"; exit 0; }
[ -x /usr/lib/llvm-19/bin/clang-offload-bundler ] || { echo "SKIPPED: clang-tools-19 not installed"; exit 0; }
ls /usr/lib/*/amdgcn/bitcode/ockl.bc >/dev/null 2>&1 || { echo "SKIPPED: rocm-device-libs not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if ! cmake -S "$src" -B "$tmp/b" -DTILELAB_GPU=hip -DTILELAB_HIP_LAYOUT=debian -DCMAKE_HIP_ARCHITECTURES=gfx942 \
     -DTILELAB_TESTS=OFF >"$tmp/cfg.log" 2>&1; then
  tail -20 "$tmp/cfg.log"; echo "FAIL: configure"; exit 1
fi
if ! cmake --build "$tmp/b" --target tilelab -j2 >"$tmp/build.log" 2>&1; then
  grep -m20 -E "error|Error" "$tmp/build.log"; echo "FAIL: build"; exit 1
fi
bin=$tmp/b/tilelab
grep -qi "warning" "$tmp/build.log" && fail "the HIP build printed warnings: $(grep -m3 -i warning "$tmp/build.log")"
# (whole outputs to files first: with pipefail, grep -q closing a pipe early fails the producer)
ldd "$bin" >"$tmp/ldd" 2>&1
grep -q "libamdhip64" "$tmp/ldd" || fail "tilelab is not linked against libamdhip64"
for o in "$tmp"/b/tilelab_gpu_hip/*.o; do # each object's .hip_fatbin bundles a gfx942 code object
  # (but moe_prefill's: its kernels are sm_90a's wgmma kernels, built for NVIDIA only)
  [ "$(basename "$o")" = moe_prefill.o ] && continue
  objcopy -O binary --only-section=.hip_fatbin "$o" "$tmp/fatbin" 2>/dev/null
  /usr/lib/llvm-19/bin/clang-offload-bundler --list --type=o --input="$tmp/fatbin" >"$tmp/bundles" 2>/dev/null
  grep -q "amdgcn-amd-amdhsa--gfx942" "$tmp/bundles" || fail "$(basename "$o") holds no gfx942 code object"
done
"$bin" version >"$tmp/out" 2>&1 || fail "tilelab version exited $?"
"$bin" bench roofline --hw h200 --iters 1 --warmup 0 --quick >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ -e /dev/kfd ]; then
  echo "note: /dev/kfd exists, the no-GPU checks are skipped"
else
  [ $rc -eq 1 ] || fail "bench roofline without a GPU exited $rc, want 1"
  grep -q "^tilelab: error: bench roofline: no GPU" "$tmp/err" || fail "bench roofline: '$(cat "$tmp/err")'"
  # a GPU build without a device checks like a build without a GPU, and bench says why it stops
  "$bin" check moe --experts 16 --topk 4 --tokens 1 --seed 1 >"$tmp/out" 2>&1; rc=$?
  [ $rc -eq 0 ] || fail "check moe without a GPU exited $rc: $(tail -2 "$tmp/out")"
  grep -q "GPU part skipped: no GPU found on this machine" "$tmp/out" || fail "check moe does not say the GPU part was skipped"
  "$bin" bench moe --tokens 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] || fail "bench moe without a GPU exited $rc, want 1"
  grep -q "^tilelab: error: bench: moe needs a GPU: no GPU found" "$tmp/err" || fail "bench moe: '$(cat "$tmp/err")'"
fi
[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "cli_hip_build: the HIP build (clang-19, gfx942) compiled, linked and ran"
