#!/usr/bin/env bash
# Fused quantization (issue 20) on the lent NVIDIA H200, in one device call: the checks first (every
# code and scale against numerics' quantizer, exactly), then the bench and the torch formulation.
#   here:    bash scripts/device_bundle.sh build-quant-bundle build-quant-gpu
#   device:  run(command="bash bench/quant_h200.sh", carry=["build-quant-bundle"])
# Writes under $OUT: quant_check.txt, quant_bench.csv, quant_torch.csv, quant_env.txt. QUANT_PARTS
# (default "check bench torch") picks what runs. The model's prediction for the bench shapes, committed
# before the first run: bench/results/h200_quant_sim.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -n "${OUT:-}" ] || { echo "quant_h200.sh: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
B=${QUANT_BUNDLE:-build-quant-bundle}
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
T="timeout 240 $B/tilelab"   # a kernel that hangs must not take the whole lease
parts=${QUANT_PARTS:-check bench torch}
shapes="1:7168 4096:7168 16384:4096"   # the issue's: one token, a prefill batch, 16M values
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } >"$OUT/quant_env.txt" 2>&1
rc=0
if [[ " $parts " == *" check "* ]]; then
  {
    for dist in normal adversarial outliers; do
      for opts in "--scheme fp8" "--scheme fp8 --ue8m0" "--scheme fp8 --scale-layout col" "--scheme fp8-fnuz" \
                  "--scheme fp8-fnuz --ue8m0 --scale-layout col" "--scheme mxfp8" "--scheme mxfp8 --rule up" \
                  "--scheme mxfp4" "--scheme mxfp4 --rule up" "--scheme dispatch" "--scheme dispatch --ue8m0"; do
        echo "== check quant $opts --dist $dist"
        $T check quant $opts --rows 1,3,130,4096 --k 128,1152,7168 --dist $dist --seed 3 || rc=1
      done
      for opts in "--scheme fp8-query" "--scheme fp8-query --hadamard" "--scheme fp8-query --hadamard --ue8m0"; do
        echo "== check quant $opts --dist $dist"
        $T check quant $opts --rows 1,130,4096 --k 128,4096 --dist $dist --seed 4 || rc=1
      done
    done
    echo "== check quant: the bench shapes"
    for s in $shapes; do $T check quant --rows "${s%:*}" --k "${s#*:}" --seed 5 || rc=1; done
  } 2>&1 | tee "$OUT/quant_check.txt"
fi
if [[ " $parts " == *" bench "* ]]; then
  echo "== bench quant"
  first=1
  for opts in "--scheme fp8" "--scheme fp8 --ue8m0 --scale-layout col" "--scheme mxfp8" "--scheme mxfp4" \
              "--scheme fp8-query --hadamard" "--scheme dispatch"; do
    for s in $shapes; do
      $T bench quant $opts --rows "${s%:*}" --k "${s#*:}" --hw h200 --format csv 2>>"$OUT/quant_bench.err" \
        | tail -n +$((first ? 1 : 2)) >>"$OUT/quant_bench.csv" || rc=1
      first=0
    done
  done
  cut -d, -f1,6,7,8,9,10,11 "$OUT/quant_bench.csv"
fi
if [[ " $parts " == *" torch "* ]]; then
  echo "== torch: amax, divide, cast to float8_e4m3fn (1x128 groups), graph-replayed, and the launch floor"
  PYTHONUNBUFFERED=1 python3 bench/torch_quant.py >"$OUT/quant_torch.csv" 2>"$OUT/quant_torch.err" || rc=1
  cat "$OUT/quant_torch.csv"
fi
exit $rc
