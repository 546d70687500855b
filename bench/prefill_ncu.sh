#!/usr/bin/env bash
# Nsight Compute on the prefill kernel (issue 21), on the lent H200: profiles one launch of the
# sm_90a warp-specialized kernel (pf_ws_kernel, the third) inside `tilelab bench prefill`
# (mistral-7b, 16K, each dtype) with the speed-of-light, compute, memory, warp-state, scheduler
# and source-counter sections into $OUT/prefill_ncu_DTYPE.txt; clocks left as they run
# (--clock-control none). Run from a bundle (scripts/device_bundle.sh) holding this script:
#   run(command="bash BUNDLE/prefill_ncu.sh", carry=["BUNDLE"]). PREFILL_NCU_DTYPES (default
# "bf16 fp8"), PREFILL_NCU_S (default 60) seconds a profile at most.
set -uo pipefail
[ -n "${OUT:-}" ] || { echo "prefill_ncu.sh: \$OUT is not set" >&2; exit 2; }
B=$(cd "$(dirname "$0")" && pwd)
. "$B/env.sh"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
[ -x "$ncu" ] || { echo "prefill_ncu.sh: SKIPPED: ncu not found" >&2; exit 0; }
for dt in ${PREFILL_NCU_DTYPES:-bf16 fp8}; do
  f="$OUT/prefill_ncu_$dt.txt"
  timeout "${PREFILL_NCU_S:-60}" "$ncu" --clock-control none -k "regex:pf_ws_kernel" --launch-skip 2 -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
    "$B/tilelab" bench prefill --shape mistral-7b --dtype "$dt" --seq 16384 >"$f" 2>&1
  echo "prefill_ncu.sh: $f ($?)"
done
