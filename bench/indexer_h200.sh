#!/usr/bin/env bash
# The DSA lightning indexer on the lent NVIDIA H200, in one device call: checks, then the bench and
# the torch formulation on the same shapes (issue 18; seed 000's appendix A2 shapes, H = 32 and 64).
#   here:    bash scripts/device_bundle.sh build-indexer-bundle build-cuda
#   device:  run(command="bash bench/indexer_h200.sh", carry=["build-indexer-bundle"])
# Writes under $OUT: indexer_check.txt, indexer_bench.csv, indexer_sim.csv, indexer_torch.csv,
# indexer_env.txt. INDEXER_PARTS (default "check bench torch") picks what runs; INDEXER_HW (default
# h200) is the preset the model runs on (h200,RESULT.json takes a roofline result's measured
# ceilings); INDEXER_CHECKS=quick stops the checks at the 8K square and 2048 x 16K.
# Every shape is checked: the squares from 16K on and 4096 x 64K on 256 of their rows
# (--sample-rows: the CPU reference of a whole 64K square is ~1.8e13 multiply-adds), the rest whole.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -n "${OUT:-}" ] || { echo "indexer_h200.sh: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
B=${INDEXER_BUNDLE:-build-indexer-bundle}
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
T=$B/tilelab
HW=${INDEXER_HW:-h200}
parts=${INDEXER_PARTS:-check bench torch}
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } >"$OUT/indexer_env.txt" 2>&1
rc=0
if [[ " $parts " == *" check "* ]]; then
  {
    for h in 32 64; do
      echo "== check indexer H=$h: awkward sizes, a prefix, ragged windows (lengths 0, 1, 2, 63-65, 127, kv), every BLOCK_Q"
      for q in 1 2 4 8; do
        $T check indexer --rows 1,37,1000 --kv 3001 --heads $h --block-q $q --seed 3 || rc=1
        $T check indexer --rows 100 --kv 1000 --prefix 17 --heads $h --block-q $q --seed 4 || rc=1
        $T check indexer --rows 37,1000 --kv 3001 --windows ragged --heads $h --block-q $q --seed 8 || rc=1
      done
      echo "== check indexer H=$h: squares 4K-32K, skinny, the model's BLOCK_Q"
      if [ "${INDEXER_CHECKS:-}" = quick ]; then
        for n in 4096 8192; do $T check indexer --rows $n --kv $n --heads $h --seed 5 --hw "$HW" || rc=1; done
        $T check indexer --rows 2048 --kv 16384 --heads $h --seed 6 --hw "$HW" || rc=1
        continue
      fi
      for n in 4096 8192; do $T check indexer --rows $n --kv $n --heads $h --seed 5 --hw "$HW" || rc=1; done
      for n in 16384 32768 65536; do
        $T check indexer --rows $n --kv $n --heads $h --seed 5 --hw "$HW" --sample-rows 256 || rc=1
      done
      $T check indexer --rows 2048 --kv 16384,32768,65536 --heads $h --seed 6 --hw "$HW" || rc=1
      $T check indexer --rows 4096 --kv 65536 --heads $h --seed 7 --hw "$HW" --sample-rows 256 || rc=1
    done
  } 2>&1 | tee "$OUT/indexer_check.txt"
fi
shapes="4096:4096 8192:8192 16384:16384 32768:32768 65536:65536 2048:16384 2048:32768 2048:65536 4096:65536"
if [[ " $parts " == *" bench "* ]]; then
  echo "== bench indexer"
  first=1
  for h in 32 64; do
    for s in $shapes; do
      r=${s%:*} k=${s#*:}
      for q in ${INDEXER_QS:-0 1 4}; do
        if [ $first -eq 1 ]; then
          $T bench indexer --rows $r --kv $k --heads $h --block-q $q --hw "$HW" --format csv >"$OUT/indexer_bench.csv" \
            2>>"$OUT/indexer_bench.err" || rc=1
          first=0
        else
          $T bench indexer --rows $r --kv $k --heads $h --block-q $q --hw "$HW" --format csv 2>>"$OUT/indexer_bench.err" \
            | tail -n +2 >>"$OUT/indexer_bench.csv" || rc=1
        fi
      done
      $T sim indexer --rows $r --kv $k --heads $h --hw "$HW" --format csv 2>>"$OUT/indexer_bench.err" \
        | { [ $h = 32 ] && [ $s = 4096:4096 ] && cat || tail -n +2; } >>"$OUT/indexer_sim.csv"
    done
  done
  cut -d, -f1,6,9,10,12,13,14 "$OUT/indexer_bench.csv"
fi
if [[ " $parts " == *" torch "* ]]; then
  echo "== torch formulation"
  PYTHONUNBUFFERED=1 python3 bench/torch_indexer.py --shapes "${shapes// /,}" >"$OUT/indexer_torch.csv" \
    2>"$OUT/indexer_torch.err" || rc=1
  cat "$OUT/indexer_torch.csv" | cut -d, -f1-7
fi
exit $rc
