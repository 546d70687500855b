#!/usr/bin/env bash
# Causal prefill attention (issue 21) on the lent NVIDIA H200 in one device call: the checks (bf16
# and fp8; 1K, 4K, 16K, 32K and lengths that are not tile multiples; mistral-7b, qwen3-8b,
# deepseek-v2-lite; rotation and outlier inputs), then the bench with the model beside every row and
# the SM clock, then torch's SDPA (bf16, causal) on the same shapes.
#   here:    bash scripts/device_bundle.sh build-pf-bundle build-pf-cuda
#            cp bench/prefill_h200.sh bench/torch_prefill.py bench/torch_timing.py build-pf-bundle/
#   device:  run(command="bash build-pf-bundle/prefill_h200.sh", carry=["build-pf-bundle"])
# Writes under $OUT: prefill_roofline.txt, prefill_check.txt, prefill_bench.csv, prefill_sim.csv,
# prefill_torch.csv, prefill_env.txt, prefill_err.txt. PREFILL_PARTS (default "check bench torch") picks what runs,
# PREFILL_QUICK=1 a short list of checks, PREFILL_STOP=1 skips the bench and torch after a failed check;
# PREFILL_SEQS (default "1024 4096 16384 32768") the bench lengths; PREFILL_SHORT (default
# "qwen3-8b") the shapes benched and timed by torch at 16K only; PREFILL_TILES extra --tile values
# benched at 16K, both dtypes, mistral-7b (kernel experiments). The first small check of each dtype
# runs under PREFILL_FIRST_S seconds (default 30: a kernel that hangs ends the call early).
set -uo pipefail
[ -n "${OUT:-}" ] || { echo "prefill_h200.sh: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
B=$here
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
# the model column on the preset of the GPU the call got (TL_HW overrides)
hw=${TL_HW:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H100 && echo h100 || echo h200)}
T=$B/tilelab
parts=${PREFILL_PARTS:-check bench torch}
seqs=${PREFILL_SEQS:-1024 4096 16384 32768}
err=$OUT/prefill_err.txt
: >"$err"
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } \
  >"$OUT/prefill_env.txt" 2>&1
rc=0
# time limits: checks until PREFILL_CHECK_S, benches until PREFILL_BENCH_S, torch until PREFILL_END_S
# a command that hits its time limit marks the kernel hung ($OUT/pf_hang): later checks are skipped
# (the 16K + 32K commands get PREFILL_LONG_S, default 240 s: their float64 references on a quarter of
# the cores took over 90 s on the lent H100 machine)
chk() {
  [ $SECONDS -lt ${PREFILL_CHECK_S:-150} ] || { echo "-- skipped (time): check prefill $*"; return; }
  [ ! -e "$OUT/pf_hang" ] || { echo "-- skipped (a check hung): check prefill $*"; return; }
  echo "-- check prefill $*"; timeout ${PREFILL_CMD_S:-90} "$T" check prefill "$@" 2>&1 | tail -n 12
  local st=${PIPESTATUS[0]}
  echo "-- exit $st after ${SECONDS} s"
  [ $st -ne 124 ] && [ $st -ne 137 ] || touch "$OUT/pf_hang"
}
# PREFILL_STOP=1: when the first small check of each dtype fails, or any check fails or hangs,
# nothing after the checks runs (a faulty kernel is not timed; the call ends early)
stop=0
# the wgmma layouts (kernels/wgmma.h) proven first: bench roofline's checks, one configuration a
# ceiling, short timing (PREFILL_ROOFLINE=0 skips it)
if [ "${PREFILL_ROOFLINE:-1}" = 1 ]; then
  echo "== bench roofline --quick"
  timeout 60 "$T" bench roofline --quick --iters 50 --warmup 5 --hbm-gib 1 >"$OUT/prefill_roofline.txt" 2>&1 || rc=1
  cat "$OUT/prefill_roofline.txt"
fi
if [[ " $parts " == *" check "* ]] && [ "${PREFILL_QUICK:-0}" = 1 ]; then
  {
    for dt in bf16 fp8; do
      chk --shape mistral-7b --dtype $dt --seq 1000,4097 --seed 11
      chk --shape deepseek-v2-lite --dtype $dt --seq 1000,4096 --seed 14
      chk --shape 4x2x128 --dtype $dt --seq 300 --dist outliers --rotate hadamard --seed 16
    done
  } >"$OUT/prefill_check.txt" 2>&1
  grep -E "FAIL|error|passed" "$OUT/prefill_check.txt" | head -40
elif [[ " $parts " == *" check "* ]]; then
  for dt in bf16 fp8; do
    PREFILL_CMD_S=${PREFILL_FIRST_S:-30} chk --shape 4x2x128 --dtype $dt --seq 300 --seed 10
  done >"$OUT/prefill_check_first.txt" 2>&1
  cat "$OUT/prefill_check_first.txt"
  if grep -q "exit [1-9]" "$OUT/prefill_check_first.txt"; then
    rc=1
    [ "${PREFILL_STOP:-0}" = 1 ] && stop=1
  fi
  # four streams at once (the references' input generation and quantization run on one core;
  # OpenMP's share split four ways), each holding one of the long commands
  export OMP_NUM_THREADS=$(( ${OMP_NUM_THREADS} / 4 > 0 ? ${OMP_NUM_THREADS} / 4 : 1 ))
  for dt in bf16 fp8; do
    [ $stop = 0 ] || break
    {
      PREFILL_CMD_S=${PREFILL_LONG_S:-240} chk --shape mistral-7b --dtype $dt --seq 16384,32768 --seed 12
      chk --shape mistral-7b --dtype $dt --seq 1000,1024,4096,4097 --seed 11
      chk --shape qwen3-8b --dtype $dt --seq 1,77,4097 --seed 13
      chk --shape 4x2x128 --dtype $dt --seq 300 --dist outliers --rotate hadamard --seed 16
    } >"$OUT/pf_chk_mistral_$dt.txt" 2>&1 &
    {
      PREFILL_CMD_S=${PREFILL_LONG_S:-240} chk --shape deepseek-v2-lite --dtype $dt --seq 16384,32768 --seed 15
      chk --shape deepseek-v2-lite --dtype $dt --seq 1000,1024,4096,4097 --seed 14
      chk --shape deepseek-v2-lite --dtype $dt --seq 1500 --rotate random --seed 17
    } >"$OUT/pf_chk_deepseek_$dt.txt" 2>&1 &
  done
  wait
  cat "$OUT/prefill_check_first.txt" "$OUT"/pf_chk_*.txt >"$OUT/prefill_check.txt" 2>/dev/null
  rm -f "$OUT"/pf_chk_*.txt "$OUT/prefill_check_first.txt" "$OUT/pf_hang"
  export OMP_NUM_THREADS=$(( OMP_NUM_THREADS * 4 ))
  if grep -q "exit [1-9]" "$OUT/prefill_check.txt"; then
    rc=1
    [ "${PREFILL_STOP:-0}" = 1 ] && stop=1
  fi
  grep -cE "FAIL|error|exit [1-9]|skipped" "$OUT/prefill_check.txt" | sed 's/^/check failures, errors or skips: /'
  grep -E "FAIL|error|passed|exit|skipped" "$OUT/prefill_check.txt" | head -60
fi
if [[ " $parts " == *" bench "* ]] && [ $stop = 0 ]; then
  echo "== bench prefill"
  list=$(echo $seqs | tr ' ' ',')
  first=1
  for sh in mistral-7b deepseek-v2-lite qwen3-8b; do
    for dt in bf16 fp8; do
      [ $SECONDS -lt ${PREFILL_BENCH_S:-330} ] || { echo "skipped (time): bench $sh $dt" >>"$err"; continue; }
      s=$list
      [[ " ${PREFILL_SHORT:-qwen3-8b} " == *" $sh "* ]] && s=16384
      args=(--shape $sh --dtype $dt --seq "$s" --hw $hw --format csv)
      if [ $first -eq 1 ]; then
        timeout 150 "$T" bench prefill "${args[@]}" >"$OUT/prefill_bench.csv" 2>>"$err" || rc=1
        "$T" sim prefill "${args[@]}" >"$OUT/prefill_sim.csv" 2>>"$err" || rc=1
        first=0
      else
        timeout 150 "$T" bench prefill "${args[@]}" 2>>"$err" | tail -n +2 >>"$OUT/prefill_bench.csv" || rc=1
        "$T" sim prefill "${args[@]}" 2>>"$err" | tail -n +2 >>"$OUT/prefill_sim.csv" || rc=1
      fi
    done
  done
  for tile in ${PREFILL_TILES:-}; do
    for dt in bf16 fp8; do
      timeout 60 "$T" bench prefill --shape mistral-7b --dtype $dt --seq 16384 --tile "$tile" --hw $hw --format csv \
        2>>"$err" | tail -n +2 >>"$OUT/prefill_bench.csv" || rc=1
    done
  done
  cut -d, -f1,8,11-16 "$OUT/prefill_bench.csv"
fi
if [[ " $parts " == *" torch "* ]] && [ $stop = 0 ]; then
  echo "== torch SDPA"
  shapes=""
  short=" ${PREFILL_SHORT:-qwen3-8b} "
  for s in $seqs; do
    shapes="$shapes,mistral-7b:32:8:128:128:$s"
    [[ $short == *" deepseek-v2-lite "* ]] || shapes="$shapes,deepseek-v2-lite:16:16:192:128:$s"
  done
  [[ $short == *" deepseek-v2-lite "* ]] && shapes="$shapes,deepseek-v2-lite:16:16:192:128:16384"
  shapes="${shapes#,},qwen3-8b:32:8:128:128:16384"
  PYTHONUNBUFFERED=1 PYTHONPATH=$B timeout $((${PREFILL_END_S:-420} - SECONDS)) python3 "$B/torch_prefill.py" \
    --shapes "$shapes" >"$OUT/prefill_torch.csv" 2>>"$err" || rc=1
  cut -d, -f1,8-10 "$OUT/prefill_torch.csv"
fi
exit $rc
