#!/usr/bin/env bash
# Decode A/B in one device call: issue 19's bar shapes benched with the bundle's binary (tilelab:
# tensor-copy paged kernel, hash-set dual-scope repeats), with the variant of
# bench/results/h100_decode_variant_early_run56.patch (tilelab_early.xz: the unit read into registers and
# its stage refilled at once; its paged checks too) and with a baseline binary (tilelab_r54.xz: the
# kernels before the tensor copies, main at 6291994), then torch SDPA on the same shapes. ~105 s
# of command. Bundle (here):
#   bash scripts/device_bundle.sh build-decode-bundle build-cuda
#   cp bench/decode_ab_h200.sh bench/decode_h200.sh bench/torch_decode.py bench/torch_timing.py build-decode-bundle/
#   a second build with -DTL_PG_EARLY=1 after applying the patch, stripped, xz -c > build-decode-bundle/tilelab_early.xz;
#   main's build, stripped, xz -c > build-decode-bundle/tilelab_r54.xz; copy the bundle to /work/main/
# Device: run(command="bash build-decode-bundle/decode_ab_h200.sh", carry=["build-decode-bundle"], timeout_s=115)
# Either variant binary may be left out of the bundle (its rows are skipped).
# Writes under $OUT: env.txt, bench.csv, bench_early.csv, check_early.txt, bench_r54.csv, torch.csv, err.txt.
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
. "$B/env.sh"
export OMP_NUM_THREADS=16
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version --format=csv; } >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for x in tilelab_early tilelab_r54; do [ -f "$B/$x.xz" ] && xz -dc "$B/$x.xz" >/tmp/$x && chmod +x /tmp/$x; done
bench() { # binary time-limit
  local bin=$1 lim=$2 s
  for s in "${shapes[@]}"; do
    [ $SECONDS -lt $lim ] || { echo "skipped (time): $bin $s" >&2; continue; }
    local exe=$B/$bin; [ -x "$exe" ] || exe=/tmp/$bin
    [ -x "$exe" ] || { echo "skipped (not in the bundle): $bin" >&2; return; }
    timeout 40 "$exe" bench decode --kind $s --hw h200 --format csv 2>>"$OUT/err.txt" | sed "s/^/$bin,/"
  done
}
shapes=(
  "paged --kv bf16 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
  "paged --kv fp8 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
  "dual-scope --kv fp8 --batch 1,2,4,8,16,32 --seq 32768 --heads 128 --window 128 --topk 512"
  "dual-scope --kv fp8 --batch 1,8,32 --seq 32768 --heads 128 --window 128 --topk 2048"
  "paged --kv bf16 --batch 1 --seq 16384 --kv-heads 16 --gqa 1"
  "paged --kv bf16 --batch 8 --seq 4096 --kv-heads 8 --gqa 8"
  "paged --kv bf16 --batch 1 --seq 1048576 --kv-heads 16 --gqa 1"
  "paged --kv fp8 --batch 1 --seq 1048576 --kv-heads 16 --gqa 1"
)
echo "== bench new"
bench tilelab 48 >"$OUT/bench.csv"
grep -v ",name," "$OUT/bench.csv" | cut -d, -f3,5-8,12,13
echo "== bench early variant"
shapes=(
  "paged --kv bf16 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
  "paged --kv fp8 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
)
bench tilelab_early 62 >"$OUT/bench_early.csv"
grep -v ",name," "$OUT/bench_early.csv" | cut -d, -f3,5-8,12,13
echo "== checks of the early variant (paged)"
{
for kv in bf16 fp8; do
  for sh in 0 1 5 64; do
    [ $SECONDS -lt 72 ] && timeout 20 /tmp/tilelab_early check decode --kind paged --kv $kv --batch 7 --seq 3001 --kv-heads 3 --gqa 1,4,8,16 --mixed --shards $sh --seed 11 2>&1 | tail -n 12
  done
  [ $SECONDS -lt 72 ] && timeout 20 /tmp/tilelab_early check decode --kind paged --kv $kv --lens 0,1,15,16,17,33,0 --kv-heads 2 --gqa 4,16 --shards 3 --seed 12 2>&1 | tail -n 12
  [ $SECONDS -lt 72 ] && timeout 20 /tmp/tilelab_early check decode --kind paged --kv $kv --batch 5 --seq 2000 --kv-heads 4 --gqa 2 --mixed --dist outliers --shards 7 --seed 14 2>&1 | tail -n 12
done
} >"$OUT/check_early.txt" 2>&1
echo "early checks: $(grep -c "comparisons passed" "$OUT/check_early.txt") commands all passed, $(grep -cE " FAIL |^tilelab: error" "$OUT/check_early.txt") failures"
echo "== bench run 54's binary"
shapes=(
  "paged --kv fp8 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
  "dual-scope --kv fp8 --batch 1,8,32 --seq 32768 --heads 128 --window 128 --topk 512"
  "dual-scope --kv fp8 --batch 8,32 --seq 32768 --heads 128 --window 128 --topk 2048"
  "paged --kv bf16 --batch 32 --seq 16384 --kv-heads 16 --gqa 1"
)
bench tilelab_r54 86 >"$OUT/bench_r54.csv"
grep -v ",name," "$OUT/bench_r54.csv" | cut -d, -f3,5-8,12,13
echo "== torch SDPA"
PYTHONUNBUFFERED=1 timeout $((104 - SECONDS)) python3 "$B/torch_decode.py" \
  --paged "bf16:32:16384:16:1,fp8:32:16384:16:1" \
  --dual "1:32768:128:128:512,8:32768:128:128:512,32:32768:128:128:512,1:32768:128:128:2048,8:32768:128:128:2048,32:32768:128:128:2048" \
  >"$OUT/torch.csv" 2>>"$OUT/err.txt"
cut -d, -f1,10-12 "$OUT/torch.csv"
nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv >>"$OUT/env.txt" 2>&1
echo "elapsed $SECONDS s"
tail -5 "$OUT/err.txt"
