#!/usr/bin/env bash
# Top-k on the lent NVIDIA H200, in one device call: checks first, then the bench and torch.topk.
#   here:    bash scripts/device_bundle.sh build-topk-bundle build-topk-gpu
#   device:  run(command="bash bench/topk_h200.sh", carry=["build-topk-bundle"])
# Writes under $OUT: topk_check.txt, topk_bench.csv, topk_splits.csv, topk_trace.csv (B = 1: 4K, 64K,
# 1M), topk_trace_b32.csv (B = 32, 1M), topk_torch.csv, topk_env.txt. TOPK_PARTS (default "check
# bench splits trace torch") picks what runs.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -n "${OUT:-}" ] || { echo "topk_h200.sh: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
B=${TOPK_BUNDLE:-build-topk-bundle}
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
T="timeout 240 $B/tilelab"   # a kernel that hangs must not take the whole lease
parts=${TOPK_PARTS:-check bench splits trace torch}
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } >"$OUT/topk_env.txt" 2>&1
rc=0
if [[ " $parts " == *" check "* ]]; then
  {
    for dist in normal ties few-distinct nan inf sorted reversed; do
      echo "== check topk --dist $dist"
      $T check topk --n 4096,65536,262144,1048576 --batch 1,32 --k 512,2048 --dist $dist --seed 3 || rc=1
    done
    echo "== check topk sorted, bf16 and f16, causal, 4M"
    $T check topk --n 4096,1048576 --batch 1,32 --k 512,2048 --sorted --seed 4 || rc=1
    $T check topk --n 65536,1048576 --batch 1,32 --k 512 --dtype bf16 --dist ties --seed 5 || rc=1
    $T check topk --n 65536 --batch 32 --k 2048 --dtype f16 --dist nan --seed 6 || rc=1
    $T check topk --n 65536 --batch 4096 --k 2048 --causal --seed 7 || rc=1
    $T check topk --n 262144 --batch 256 --k 2048 --causal --seed 7 || rc=1
    $T check topk --n 4194304 --batch 1,32 --k 512,2048 --seed 8 || rc=1
    for dist in normal ties few-distinct nan inf sorted reversed; do
      echo "== check topk --path stream --dist $dist"
      for s in 1 8 64; do
        $T check topk --n 1,300,5000,65536,1048576 --batch 1,32 --k 1,512,2048 --dist $dist --path stream --split $s \
          --seed 9 || rc=1
      done
    done
    echo "== check topk --path stream: sorted, bf16, f16, 4096 (k), causal, listed lengths"
    $T check topk --n 65536,1048576 --batch 1,32 --k 512,2048,4096 --sorted --path stream --split 4 --seed 10 || rc=1
    $T check topk --n 65536,1048576 --batch 32 --k 512,2048 --dtype bf16 --dist ties --path stream --split 8 --seed 11 || rc=1
    $T check topk --n 65536 --batch 32 --k 512,2048 --dtype f16 --dist nan --path stream --split 2 --seed 12 || rc=1
    $T check topk --n 65536 --batch 300 --k 2048 --causal --sorted --path stream --split 1 --seed 13 || rc=1
  } 2>&1 | tee "$OUT/topk_check.txt"
fi
if [[ " $parts " == *" bench "* ]]; then
  echo "== bench topk"
  $T bench topk --n 4096,65536,262144,1048576,4194304 --batch 1,32 --k 512,2048 --hw h200 --format csv \
    >"$OUT/topk_bench.csv" 2>"$OUT/topk_bench.err" || rc=1
  $T bench topk --n 65536 --batch 4096 --k 2048 --causal --hw h200 --format csv 2>>"$OUT/topk_bench.err" \
    | tail -n +2 >>"$OUT/topk_bench.csv" || rc=1
  $T bench topk --n 262144 --batch 256 --k 2048 --causal --hw h200 --format csv 2>>"$OUT/topk_bench.err" \
    | tail -n +2 >>"$OUT/topk_bench.csv" || rc=1
  cut -d, -f1,5,6,8,9,10,11,12 "$OUT/topk_bench.csv"
fi
if [[ " $parts " == *" splits "* ]]; then
  echo "== bench topk, splits beside the model's"
  { $T bench topk --n 65536 --batch 1 --k 512 --split 1 --hw h200 --format csv
    for s in 2 4 8 16 32 64; do $T bench topk --n 65536 --batch 1 --k 512 --split $s --hw h200 --format csv | tail -n +2; done
    for s in 64 128 256; do $T bench topk --n 1048576 --batch 1 --k 512 --split $s --hw h200 --format csv | tail -n +2; done
    for s in 16 32 64 128; do $T bench topk --n 1048576 --batch 32 --k 512 --split $s --hw h200 --format csv | tail -n +2; done
    for s in 1 2 4 8 16 32; do
      $T bench topk --n 1048576 --batch 32 --k 512 --path stream --split $s --hw h200 --format csv | tail -n +2
    done
    for s in 1 2; do
      $T bench topk --n 65536 --batch 4096 --k 2048 --causal --path stream --split $s --hw h200 --format csv | tail -n +2
    done
    for s in 8 32 128; do
      $T bench topk --n 65536,1048576 --batch 1 --k 512 --path stream --split $s --hw h200 --format csv | tail -n +2
    done
  } >"$OUT/topk_splits.csv" 2>>"$OUT/topk_bench.err" || rc=1
  cut -d, -f1,5,6,8,9,10,11,12 "$OUT/topk_splits.csv"
fi
if [[ " $parts " == *" trace "* ]]; then
  echo "== bench topk --trace (one run per case, block by block)"
  $T bench topk --n 4096,65536,1048576 --batch 1 --k 512 --hw h200 --format csv --trace "$OUT/topk_trace.csv" \
    >/dev/null 2>>"$OUT/topk_bench.err" || rc=1
  $T bench topk --n 1048576 --batch 32 --k 512 --path resident --split 64 --hw h200 --format csv \
    --trace "$OUT/topk_trace_b32.csv" >/dev/null 2>>"$OUT/topk_bench.err" || rc=1
  wc -l "$OUT"/topk_trace*.csv
fi
if [[ " $parts " == *" torch "* ]]; then
  echo "== torch.topk"
  PYTHONUNBUFFERED=1 python3 bench/torch_topk.py >"$OUT/topk_torch.csv" 2>"$OUT/topk_torch.err" || rc=1
  cut -d, -f1,5 "$OUT/topk_torch.csv"
fi
exit $rc
