#!/usr/bin/env bash
# Builds tilelab twice (release, then AddressSanitizer + UndefinedBehaviorSanitizer) and runs every
# test in both. GPU compile checks run inside ctest where their compilers are found, and say
# plainly when they are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
for variant in release sanitize; do
  dir=build-test-$variant
  flags=(-DCMAKE_BUILD_TYPE=Release)
  [ "$variant" = sanitize ] && flags=(-DCMAKE_BUILD_TYPE=Debug -DTILELAB_SANITIZE=ON)
  echo "== $variant build =="
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
  echo "== $variant tests =="
  # the HIP build check builds its own tilelab, the same in both variants: once is enough
  # and the device compiles of cli_gpu_compile likewise (its command checks run in both)
  skip=(); host_only=0; [ "$variant" = sanitize ] && skip=(-E '^cli_hip_build$') && host_only=1
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TILELAB_TEST_HOST_ONLY=$host_only \
     ctest --output-on-failure -j "$jobs" "${skip[@]}")
  [ "$variant" = sanitize ] && echo "sanitize: cli_hip_build and cli_gpu_compile's device compiles run in the release tests only"
  # say plainly what a test skipped (e.g. the nvcc compile check on a machine without nvcc)
  grep -h "SKIPPED" "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u | sed "s/^/$variant: /" || true
done
