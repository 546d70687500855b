#!/usr/bin/env bash
# Nsight Compute on one fused-MoE stage, on the lent H200 (or any NVIDIA GPU with ncu):
#   OUT=dir bash bench/moe_ncu.sh DTYPE TOKENS STAGE [KERNEL_REGEX]
# profiles the third launch of the stage's GEMM kernel (moe_gemm; KERNEL_REGEX picks another, e.g.
# moe_quant_act) inside `tilelab bench moe` (DeepSeek-V3.2, balanced routing) and
# writes the speed-of-light, memory, warp-state and scheduler sections to
# $OUT/moe_ncu_DTYPE_M<TOKENS>_s<STAGE>.txt. Clocks are left as they run (--clock-control none).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: OUT=dir bash bench/moe_ncu.sh DTYPE TOKENS STAGE [KERNEL_REGEX]" >&2; exit 2; }
[ -n "${OUT:-}" ] || { echo "moe_ncu.sh: \$OUT is not set" >&2; exit 2; }
B=${MOE_BUNDLE:-build-moe-bundle}
. "$B/env.sh"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
[ -x "$ncu" ] || { echo "moe_ncu.sh: SKIPPED: ncu not found" >&2; exit 0; }
f="$OUT/moe_ncu_$1_M$2_s$3.txt"
"$ncu" --clock-control none -k "regex:${4:-moe_gemm}" --launch-skip 2 -c 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section Occupancy \
  "$B/tilelab" bench moe --model deepseek-v3.2 --dtype "$1" --tokens "$2" --stage "$3" --routing balanced >"$f" 2>&1
echo "moe_ncu.sh: $f ($?)"
