#!/usr/bin/env bash
# One model layer measured on the lent GPU against the step model's prediction (issue 39): the
# kernels tilelab has, run as one GLM-5 MoE layer of a decode step on one GPU of 8 would run them
# (tp 8: quantization, the indexer, top-k, the sparse MLA decode, the fused MoE's two stages), each
# timed by its own `tilelab bench OP` (the seed's method: L2 flushed, 20 + 200, median, graphs),
# and the layer's dense GEMMs timed by their torch peer (bench/torch_step_gemm.py: cuBLAS). The
# layer's time is the sum of its calls' medians, which is what the step model sums; the two
# all-reduces need 8 GPUs and are left out of both sides.
#   here:    bash scripts/device_bundle.sh build-step-bundle build-step-gpu
#   device:  run(command="bash bench/step_layer.sh", carry=["build-step-bundle"])
# The prediction, committed before the first run: bench/results/step_layer_prediction.csv (columns
# hw,batch,context,name,op,predicted_us,limiter,cmd; made by `bash bench/step_layer.sh --predict`
# here, without a GPU). On the device the script picks the preset of its GPU (h100 or h200) and
# runs that preset's rows; writes under $OUT: step_layer_measured.csv (every call: predicted,
# measured, error), step_layer_gemm.csv (torch), step_layer_bench.txt (each bench's CSV),
# step_layer_env.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
pred=bench/results/step_layer_prediction.csv
points="1:4096 32:4096"   # batch:context; GLM-5 decode, tp 8, kv bf16, experts fp8, dense fp8
if [ "${1:-}" = "--predict" ]; then
  tl=${TILELAB:-build/tilelab}
  echo "hw,batch,context,name,op,predicted_us,limiter,cmd" >"$pred.tmp"
  for hw in h100 h200; do
    for p in $points; do
      "$tl" sim step --model glm-5 --hw "$hw" --tp 8 --batch "${p%:*}" --context "${p#*:}" --kv-dtype bf16 \
        --experts fp8 --dense fp8 --rows calls --format csv |
        python3 -c '
import csv, sys
hw, batch, context = sys.argv[1:4]
w = csv.writer(sys.stdout, lineterminator="\n")
for r in csv.DictReader(sys.stdin):
    if r["layer"] != "moe layer" or r["op"] == "all-reduce":
        continue
    w.writerow([hw, batch, context, r["name"], r["op"], r["time_us"], r["limiter"], r["cmd"]])
' "$hw" "${p%:*}" "${p#*:}" >>"$pred.tmp" || exit 1
    done
  done
  mv "$pred.tmp" "$pred"
  echo "wrote $pred"
  exit 0
fi
[ -n "${OUT:-}" ] || { echo "step_layer.sh: \$OUT is not set (run it through the device tool, or --predict)" >&2; exit 2; }
B=${STEP_BUNDLE:-build-step-bundle}
. "$B/env.sh"
T="timeout 240 $B/tilelab"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) hw=h200 ;; *H100*) hw=h100 ;; *) echo "step_layer.sh: no preset for '$gpu'" >&2; exit 1 ;; esac
{ date -u; echo "preset $hw"; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } >"$OUT/step_layer_env.txt" 2>&1
export PYTHONPATH=bench${PYTHONPATH:+:$PYTHONPATH}
rc=0
# the GEMMs: one torch process for all of them
python3 -c '
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["hw"] == sys.argv[2] and r["op"] == "gemm":
        print("%s|%s|%s\t%s" % (r["batch"], r["context"], r["name"], r["cmd"]))
' "$pred" "$hw" | PYTHONUNBUFFERED=1 python3 "${STEP_GEMM_PEER:-bench/torch_step_gemm.py}" >"$OUT/step_layer_gemm.csv" 2>"$OUT/step_layer_gemm.err" || rc=1
# the kernels: each call's `sim OP ...` as `bench OP ...`, its time_us column
: >"$OUT/step_layer_bench.txt"
echo "batch,context,name,op,predicted_us,measured_us,err_pct,limiter,cmd" >"$OUT/step_layer_measured.csv"
while IFS= read -r line; do
  IFS=$'\t' read -r batch context name op predicted limiter cmd < <(python3 -c '
import csv, sys
r = next(csv.reader([sys.argv[1]]))
print("\t".join(r[1:]))' "$line")
  if [ "$op" = "gemm" ]; then
    measured=$(python3 -c '
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["name"] == sys.argv[2]:
        print(r["time_us"]); break' "$OUT/step_layer_gemm.csv" "$batch|$context|$name")
  else
    # shellcheck disable=SC2086
    out=$($T bench ${cmd#sim } --format csv 2>>"$OUT/step_layer_bench.txt") || rc=1
    printf '== %s\n%s\n' "$cmd" "$out" >>"$OUT/step_layer_bench.txt"
    measured=$(python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
print(rows[-1]["time_us"] if rows else "")' <<<"$out")
  fi
  err=$(python3 -c 'import sys; p, m = sys.argv[1:]; print("%.1f" % (100 * (float(p) - float(m)) / float(m)) if m else "")' "$predicted" "${measured:-}")
  python3 -c 'import csv, sys; csv.writer(sys.stdout, lineterminator="\n").writerow(sys.argv[1:])' \
    "$batch" "$context" "$name" "$op" "$predicted" "${measured:-}" "$err" "$limiter" "$cmd" >>"$OUT/step_layer_measured.csv"
done < <(python3 -c '
import csv, sys
rd = csv.reader(open(sys.argv[1])); next(rd)
w = csv.writer(sys.stdout, lineterminator="\n")
for r in rd:
    if r[0] == sys.argv[2]: w.writerow(r)' "$pred" "$hw")
# the layer: predicted and measured sums per serving point
python3 - "$OUT/step_layer_measured.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for key in sorted({(r["batch"], r["context"]) for r in rows}, key=lambda k: int(k[0])):
    rs = [r for r in rows if (r["batch"], r["context"]) == key]
    p = sum(float(r["predicted_us"]) for r in rs)
    missing = [r["name"] for r in rs if not r["measured_us"]]
    m = sum(float(r["measured_us"]) for r in rs if r["measured_us"])
    print("batch %s, context %s: predicted %.1f us, measured %.1f us (%+.1f%%)%s" % (
        key[0], key[1], p, m, 100 * (p - m) / m if m else 0, "; not measured: " + ", ".join(missing) if missing else ""))
PY
exit $rc
