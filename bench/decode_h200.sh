#!/usr/bin/env bash
# Split-KV decode (issue 19) on the lent NVIDIA H200 in one device call: the checks (paged and
# dual-scope, bf16 and fp8, GQA 1-16, mixed lengths with 0 and 1, windows longer than the sequence,
# top-k lists with repeats and window positions, 1 to 64 shards), then the bench with the model
# beside every row, then torch's SDPA on the same shapes.
#   here:    bash scripts/device_bundle.sh build-dec-bundle build-cuda-dec
#            cp bench/decode_h200.sh bench/torch_decode.py bench/torch_timing.py build-dec-bundle/
#   device:  run(command="bash build-dec-bundle/decode_h200.sh", carry=["build-dec-bundle"])
# Writes under $OUT: decode_check.txt, decode_bench.csv, decode_sim.csv, decode_torch.csv,
# decode_env.txt, decode_err.txt. DECODE_PARTS (default "check bench torch") picks what runs;
# DECODE_QUICK=1 keeps the checks small.
set -uo pipefail
[ -n "${OUT:-}" ] || { echo "decode_h200.sh: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/tilelab" ]; then B=$here; else B=${DECODE_BUNDLE:-$here/../build-dec-bundle}; fi
torch_py=$here/torch_decode.py
[ -f "$torch_py" ] || torch_py=$B/torch_decode.py
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
T=$B/tilelab
parts=${DECODE_PARTS:-check bench torch}
err=$OUT/decode_err.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } >"$OUT/decode_env.txt" 2>&1
rc=0
# time limits (the device call has 300 s): checks until 100 s, benches until 230 s, torch the rest
chk() {
  [ $SECONDS -lt ${DECODE_CHECK_S:-100} ] || { echo "-- skipped (time): check decode $*"; return; }
  echo "-- check decode $*"; timeout 40 "$T" check decode "$@" 2>&1 | tail -n 30 || rc=1
}

if [[ " $parts " == *" check "* ]]; then
  {
    for kv in bf16 fp8; do
      echo "== paged $kv: GQA 1/4/8/16, mixed lengths (0 and 1 among them), the model's shards and 1, 5, 64"
      for sh in 0 1 5 64; do
        chk --kind paged --kv $kv --batch 7 --seq 3001 --kv-heads 3 --gqa 1,4,8,16 --mixed --shards $sh --seed 11
      done
      chk --kind paged --kv $kv --lens 0,1,15,16,17,33,0 --kv-heads 2 --gqa 4,16 --shards 3 --seed 12
      chk --kind paged --kv $kv --batch 2 --seq 70001 --kv-heads 2 --gqa 8 --seed 13
      chk --kind paged --kv $kv --batch 5 --seq 2000 --kv-heads 4 --gqa 2 --mixed --dist outliers --shards 7 --seed 14
      echo "== dual-scope $kv: H 128/48/16, windows, top-k with repeats and window positions, shards"
      for sh in 0 1 7 64; do
        chk --kind dual-scope --kv $kv --batch 3 --seq 3000 --heads 128,48,16 --window 128 --topk 512 --mixed --dist edges --shards $sh --seed 21
      done
      chk --kind dual-scope --kv $kv --batch 2 --seq 900 --heads 64 --mtp 3 --window 4000 --topk 256 --dist edges --seed 22
      chk --kind dual-scope --kv $kv --batch 2 --seq 5000 --heads 128 --mtp 2 --window 0 --topk 2048 --shards 0 --seed 23
      chk --kind dual-scope --kv $kv --batch 4 --seq 600 --heads 32 --window 128 --topk 0 --mixed --shards 5 --seed 24
      chk --kind dual-scope --kv $kv --lens 0,1,2,300 --heads 128 --mtp 2 --window 128 --topk 64 --dist edges --shards 3 --seed 25
    done
  } >"$OUT/decode_check.txt" 2>&1
  # a failed comparison's row says FAIL, a failed command says "tilelab: error" (the fp8 rows'
  # notes speak of the format's error: not a failure)
  grep -cE " FAIL |^tilelab: error" "$OUT/decode_check.txt" | sed 's/^/check failures or errors: /'
  grep -cE "comparisons passed" "$OUT/decode_check.txt" | sed 's/^/check commands with every comparison passed: /'
  grep -E " FAIL |^tilelab: error|skipped" "$OUT/decode_check.txt" | head -20
fi

# bench shapes: "kind kv batch seq extra..."
bench_shapes=(
  "paged bf16 32 16384 --kv-heads 16 --gqa 1"
  "paged fp8 32 16384 --kv-heads 16 --gqa 1"
  "paged fp8 32 65536 --kv-heads 8 --gqa 4"
  "paged bf16 128 16384 --kv-heads 4 --gqa 16"
  "paged fp8 32 65536 --kv-heads 8 --gqa 16"
  "paged bf16 1 16384 --kv-heads 16 --gqa 1"
  "paged bf16 8 4096 --kv-heads 8 --gqa 8"
  "dual-scope fp8 1,2,4,8,16,32 32768 --heads 128 --window 128 --topk 512"
  "dual-scope fp8 1,8,32 32768 --heads 128 --window 128 --topk 2048"
  "dual-scope fp8 1 32768 --heads 128 --window 128 --topk 512 --shards 5"
  "dual-scope fp8 1 32768 --heads 128 --window 128 --topk 512 --shards 10"
  "dual-scope fp8 8 32768 --heads 128 --window 128 --topk 512 --shards 1"
  "paged bf16 1 1048576 --kv-heads 16 --gqa 1"
  "paged fp8 1 1048576 --kv-heads 16 --gqa 1"
)
if [[ " $parts " == *" bench "* ]]; then
  echo "== bench decode"
  first=1
  for s in "${bench_shapes[@]}"; do
    [ $SECONDS -lt ${DECODE_BENCH_S:-230} ] || { echo "skipped (time): bench $s" >>"$err"; continue; }
    set -- $s
    kind=$1 kv=$2 batch=$3 seq=$4
    shift 4
    args=(--kind "$kind" --kv "$kv" --batch "$batch" --seq "$seq" "$@" --hw h200 --format csv)
    if [ $first -eq 1 ]; then
      timeout 120 "$T" bench decode "${args[@]}" >"$OUT/decode_bench.csv" 2>>"$err" || rc=1
      timeout 60 "$T" sim decode "${args[@]}" >"$OUT/decode_sim.csv" 2>>"$err" || rc=1
      first=0
    else
      timeout 120 "$T" bench decode "${args[@]}" 2>>"$err" | tail -n +2 >>"$OUT/decode_bench.csv" || rc=1
      timeout 60 "$T" sim decode "${args[@]}" 2>>"$err" | tail -n +2 >>"$OUT/decode_sim.csv" || rc=1
    fi
  done
  cut -d, -f1,7,10-14 "$OUT/decode_bench.csv"
fi
if [[ " $parts " == *" torch "* ]]; then
  echo "== torch SDPA"
  paged="bf16:32:16384:16:1,fp8:32:16384:16:1,fp8:32:65536:8:4,bf16:128:16384:4:16,fp8:32:65536:8:16,bf16:1:16384:16:1,bf16:8:4096:8:8,bf16:1:1048576:16:1"
  dual="1:32768:128:128:512,2:32768:128:128:512,4:32768:128:128:512,8:32768:128:128:512,16:32768:128:128:512,32:32768:128:128:512,1:32768:128:128:2048,8:32768:128:128:2048,32:32768:128:128:2048"
  PYTHONUNBUFFERED=1 timeout $((${DECODE_END_S:-290} - SECONDS)) python3 "$torch_py" --paged "$paged" --dual "$dual" >"$OUT/decode_torch.csv" 2>>"$err" || rc=1
  cut -d, -f1,10-12 "$OUT/decode_torch.csv"
fi
exit $rc
