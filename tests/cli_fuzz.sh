#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz, a short run each (usage: cli_fuzz.sh TILELAB SRC; TILELAB is
# unused). Each target starts from its seeds (tests/data, presets/ and tests/fuzz/seeds/, copied to
# a scratch corpus, so the source tree is never written), replays them first, then mutates them for
# TL_FUZZ_SECONDS seconds (default 4) in one process. Any crash, sanitizer report, leak, input
# slower than 10 s or allocation above 2 GiB fails the test, which prints the report and leaves the
# input in TL_FUZZ_ARTIFACTS (default: the current folder) as fuzz-crash-TARGET-*.
# Where the targets are: TL_FUZZ_DIR (set by tests/CMakeLists.txt), else the folder fuzz/ beside
# TILELAB. When tests/CMakeLists.txt did not build them it sets TL_FUZZ_SKIP to the reason, which is
# printed as one SKIPPED: line.
# Cost: 6 targets x TL_FUZZ_SECONDS plus about 2 s of start-up, on one core.
set -uo pipefail
src=$2
source "$src/tests/lib.sh"
LAST_OUT=""
if [ -n "${TL_FUZZ_SKIP:-}" ]; then echo "SKIPPED: $TL_FUZZ_SKIP"; exit 0; fi
dir=${TL_FUZZ_DIR:-$(dirname "$1")/fuzz}
[ -x "$dir/fuzz_model" ] || { echo "SKIPPED: no fuzz targets in $dir (configure with -DTILELAB_FUZZ=ON)"; exit 0; }
secs=${TL_FUZZ_SECONDS:-4}
artifacts=${TL_FUZZ_ARTIFACTS:-.}
seeds=$src/tests/fuzz/seeds

# fuzz TARGET SEED...: runs fuzz_TARGET from the seeds for $secs s; 0 when nothing was found.
fuzz() {
  local t=$1; shift
  local corpus=$tmp/corpus-$t log=$tmp/$t.log
  mkdir -p "$corpus" && cp "$@" "$corpus"/ || return 1
  if "$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$artifacts/fuzz-crash-$t-" "$corpus" >"$log" 2>&1; then
    echo "fuzz_$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") runs in $secs s from $# seeds," \
         "$(ls "$corpus" | wc -l) inputs in the corpus, nothing found"
    return 0
  fi
  echo "fuzz_$t: found a failure; the input: $(sed -n 's/.*Test unit written to //p' "$log")"
  grep -m1 -A14 -E '^==[0-9]+==ERROR|runtime error|^fuzz: |^ERROR: libFuzzer' "$log"
  return 1
}

check "fuzz_model: config.json" -- fuzz model "$src"/presets/models/*.json
check "fuzz_hw: presets and overlays" -- fuzz hw "$src"/presets/hw/*.json "$seeds"/hw/*
check "fuzz_points: tilelab, ncu and rocprofv3 CSVs" -- \
  fuzz points "$src"/tests/data/*.csv "$src"/tests/data/h200_moe_bench/*_run34.csv
check "fuzz_trace: bench traces" -- fuzz trace "$src"/tests/data/trace_h200_moe_small.csv "$seeds"/trace/*
check "fuzz_routing: routing traces" -- fuzz routing "$seeds"/routing/*
check "fuzz_npy: .npy files" -- fuzz npy "$seeds"/npy/*
finish
