#!/usr/bin/env bash
# The fused MoE on the lent NVIDIA H200, in one device call: check, bench, torch baseline.
#
#   here:    bash bench/moe_h200.sh bundle
#            scripts/device_bundle.sh: builds tilelab with nvcc (sm_90) into build-moe-gpu/ and
#            gathers it and the shared libraries it needs into build-moe-bundle/.
#   device:  run(command="bash bench/moe_h200.sh run", carry=["build-moe-bundle"])
#            writes logs and CSVs under $OUT: moe_check.txt, moe_bench_<dtype>.csv, moe_torch.csv,
#            moe_env.txt. Checks draw fresh seeds (printed). MOE_PARTS (default "quick check bench benchrandom
#            torch"; "bench" runs balanced routing, as bench/torch_grouped_mm.py routes its peer, and
#            "benchrandom" tilelab's default random routing, seed 1: moe_bench_<dtype>_random.csv;
#            "prefill" checks bf16 with stage 1 on moe_prefill_s1 (sm_90a wgmma; TILELAB_MOE_PREFILL=1) and, if
#            they pass, times stage 1 with and without it: moe_prefill_{check.txt,bench_1.csv,bench_0.csv};
#            "torchrandom" times torch._grouped_mm on the same random routing (seed 1, the same rows per
#            expert): moe_torch_random.csv; "shapes" checks seed 000 Figure 10's Kimi-K2.6 a16w4 and ZAYA1 fp8 (zaya1-e24) shapes at MOE_CHECK_TOKENS:
#            moe_shapes.txt; "benchwrite" adds the bench with --flush write: moe_bench_<dtype>_write.csv; "trace" one cold
#            run of M = 1 and 8 block by block: moe_trace_<dtype>.csv) picks what runs; MOE_CHECK_DTYPES,
#            MOE_BENCH_DTYPES and MOE_TOKENS narrow it; MOE_CHECK_BIG=1024 adds a large-M check;
#            MOE_SHAPES_TIMEOUT (seconds) bounds each 'shapes' check; MOE_QUICK_DTYPES (default all five) and MOE_CHECK_TPS (default "1 8") narrow the checks.
#            "inputs" checks the kernel on .npy tensors (numpy-made routing with ties and repeated
#            experts): `check moe --input` and `run moe --device gpu` against `--device cpu`:
#            moe_inputs.txt.
#   A/B:     MOE_BUNDLE names the bundle folder (default build-moe-bundle) and MOE_BUILD the nvcc build
#            folder (default build-moe-gpu), in both modes, so that a second variant can be bundled
#            beside the first: MOE_BUNDLE=build-moe-bundle-b MOE_BUILD=build-moe-gpu-b bash bench/moe_h200.sh bundle
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
B=${MOE_BUNDLE:-build-moe-bundle}
BUILD=${MOE_BUILD:-build-moe-gpu}
case "$B$BUILD" in *[!A-Za-z0-9._-]*) echo "moe_h200.sh: MOE_BUNDLE / MOE_BUILD must be plain folder names" >&2; exit 2 ;; esac

if [ "$mode" = bundle ]; then
  exec bash scripts/device_bundle.sh "$B" "$BUILD"
fi

[ -n "${OUT:-}" ] || { echo "moe_h200.sh run: \$OUT is not set (run it through the device tool)" >&2; exit 2; }
. "$B/env.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
# the model column on the preset of the GPU the call got (TL_HW overrides)
hw=${TL_HW:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H100 && echo h100 || echo h200)}
T=$B/tilelab
parts=${MOE_PARTS:-quick check bench benchrandom torch}
tokens=${MOE_TOKENS:-1,8,64,256,1024}
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv; nproc; } \
  >"$OUT/moe_env.txt" 2>&1
$T version || { echo "tilelab does not start here"; ldd "$T"; exit 1; }

rc=0
if [[ " $parts " == *" quick "* ]]; then # every dtype on DeepSeek's hidden size, 16 experts: seconds
  for d in ${MOE_QUICK_DTYPES:-bf16 fp8 a16w4 mxfp4 mxfp8}; do
    echo "== quick check $d"
    $T check moe --model deepseek-v3.2 --experts 16 --topk 4 --dtype "$d" --tokens 1,5,64,200 --seed 7 || rc=1
  done 2>&1 | tee "$OUT/moe_quick.txt"
  grep -q "FAIL\|error:" "$OUT/moe_quick.txt" && { echo "quick check failed: stopping"; exit 1; }
fi
if [[ " $parts " == *" check "* ]]; then
  for d in ${MOE_CHECK_DTYPES:-bf16 fp8 a16w4 mxfp4 mxfp8}; do
    for tp in ${MOE_CHECK_TPS:-1 8}; do
      echo "== check $d tp $tp"
      $T check moe --model deepseek-v3.2 --dtype "$d" --tokens ${MOE_CHECK_TOKENS:-1,16,256} --tp $tp \
        || rc=1
      if [ -n "${MOE_CHECK_BIG:-}" ] && [ $tp = 1 ]; then # two tiles per item (M = 1024) on full width
        echo "== check $d tp $tp M=$MOE_CHECK_BIG"
        $T check moe --model deepseek-v3.2 --dtype "$d" --tokens "$MOE_CHECK_BIG" || rc=1
      fi
    done
  done 2>&1 | tee "$OUT/moe_check.txt"
fi
if [[ " $parts " == *" shapes "* ]]; then # seed 000 Figure 10's other shapes: Kimi-K2.6 a16w4, ZAYA1 fp8 (E 24, top-1)
  for md in kimi-k2.6:a16w4 zaya1-e24:fp8; do
    echo "== check ${md%%:*} ${md##*:}"
    ${MOE_SHAPES_TIMEOUT:+timeout $MOE_SHAPES_TIMEOUT} $T check moe --model "${md%%:*}" --dtype "${md##*:}" \
      --tokens ${MOE_CHECK_TOKENS:-1,16,256} || { echo "(exit $?)"; rc=1; }
  done 2>&1 | tee "$OUT/moe_shapes.txt"
fi
if [[ " $parts " == *" bench "* ]]; then
  for d in ${MOE_BENCH_DTYPES:-bf16 fp8}; do
    echo "== bench $d (balanced routing, as the torch peer)"
    $T bench moe --model deepseek-v3.2 --dtype "$d" --tokens "$tokens" --hw $hw --routing balanced --format csv \
      >"$OUT/moe_bench_$d.csv" 2>"$OUT/moe_bench_$d.err" || rc=1
    cut -d, -f1,7,10,12,13 "$OUT/moe_bench_$d.csv"
  done
fi
if [[ " $parts " == *" benchrandom "* ]]; then # the default routing: k distinct experts a token, uniform
  for d in ${MOE_BENCH_DTYPES:-bf16 fp8}; do
    echo "== bench $d (random routing, seed 1)"
    $T bench moe --model deepseek-v3.2 --dtype "$d" --tokens "$tokens" --hw $hw --routing random --seed 1 \
      --format csv >"$OUT/moe_bench_${d}_random.csv" 2>"$OUT/moe_bench_${d}_random.err" || rc=1
    cut -d, -f1,7,10,12,13,18 "$OUT/moe_bench_${d}_random.csv"
  done
fi
if [[ " $parts " == *" benchwrite "* ]]; then # the same with a write flush (dirty L2 lines; runs 1-11)
  for d in ${MOE_BENCH_DTYPES:-bf16 fp8}; do
    echo "== bench $d --flush write"
    $T bench moe --model deepseek-v3.2 --dtype "$d" --tokens "$tokens" --hw $hw --routing balanced --flush write --format csv \
      >"$OUT/moe_bench_${d}_write.csv" 2>"$OUT/moe_bench_${d}_write.err" || rc=1
    cut -d, -f1,7,10,12,13 "$OUT/moe_bench_${d}_write.csv"
  done
fi
if [[ " $parts " == *" trace "* ]]; then # where the time of small M goes, block by block
  for d in ${MOE_BENCH_DTYPES:-bf16 fp8}; do
    echo "== trace $d"
    $T bench moe --model deepseek-v3.2 --dtype "$d" --tokens 1,8 --hw $hw --routing balanced --trace "$OUT/moe_trace_$d.csv" \
      --format csv >/dev/null 2>"$OUT/moe_trace_$d.err" || rc=1
  done
fi
if [[ " $parts " == *" inputs "* ]]; then # the user's path: .npy in, .npy out, GPU against CPU
  {
    python3 - "$OUT" <<'PY'
import numpy as np, sys
out = sys.argv[1]; rng = np.random.default_rng(11)
M, H, E, k = 40, 7168, 256, 8
x = rng.standard_normal((M, H)).astype(np.float32) * 3
ids = np.stack([rng.choice(E, k, replace=False) for _ in range(M)]).astype(np.int32)
ids[:8] = ids[0]                                     # eight tokens on the same experts
ids[8, :] = 5                                        # one token routed to expert 5 eight times
w = rng.random((M, k)).astype(np.float32); w /= w.sum(1, keepdims=True)
w[9] = 1.0 / k                                       # tied weights
np.save(out + "/x.npy", x); np.save(out + "/ids.npy", ids); np.save(out + "/w.npy", w)
PY
    for d in ${MOE_CHECK_DTYPES:-bf16 fp8 a16w4 mxfp4 mxfp8}; do
      ins=(--input "x=$OUT/x.npy" --input "topk_ids=$OUT/ids.npy" --input "topk_weights=$OUT/w.npy" --dtype "$d")
      echo "== check moe --input $d"
      $T check moe "${ins[@]}" || rc=1
      $T run moe "${ins[@]}" --device cpu --output "$OUT/out_cpu.npy" || rc=1
      $T run moe "${ins[@]}" --device gpu --output "$OUT/out_gpu.npy" || rc=1
      python3 -c "import numpy as np; a=np.load('$OUT/out_cpu.npy'); b=np.load('$OUT/out_gpu.npy');
print('run $d: gpu vs cpu shape', b.shape, 'rel_rms %.3g' % (np.sqrt(((a-b)**2).mean()/(a**2).mean())), 'finite', np.isfinite(b).all())"
    done
    rm -f "$OUT"/*.npy
  } 2>&1 | tee "$OUT/moe_inputs.txt"
fi
if [[ " $parts " == *" torch "* ]]; then
  echo "== torch._grouped_mm bf16"
  PYTHONUNBUFFERED=1 python3 bench/torch_grouped_mm.py --tokens "$tokens" >"$OUT/moe_torch.csv" \
    2>"$OUT/moe_torch.err" || rc=1
  cut -d, -f1,4,5 "$OUT/moe_torch.csv"
fi
if [[ " $parts " == *" prefill "* ]]; then # bf16 stage 1 on moe_prefill_s1 (TILELAB_MOE_PREFILL=1) beside moe_gemm
  {
    echo "== check bf16 with moe_prefill_s1: E 16 top-4 (groups of 1-8 tiles), E 32 top-8 full width"
    TILELAB_MOE_PREFILL=1 $T check moe --model deepseek-v3.2 --experts 16 --topk 4 --dtype bf16 --tokens 1,5,64,200,400 --seed 7 || rc=1
    TILELAB_MOE_PREFILL=1 $T check moe --model deepseek-v3.2 --experts 32 --dtype bf16 --tokens 256,1024 || rc=1
  } 2>&1 | tee "$OUT/moe_prefill_check.txt"
  if ! grep -q "FAIL\|error:" "$OUT/moe_prefill_check.txt"; then
    for v in 1 0; do
      echo "== bench bf16 stage 1, random routing seed 1, TILELAB_MOE_PREFILL=$v"
      TILELAB_MOE_PREFILL=$v $T bench moe --model deepseek-v3.2 --dtype bf16 --stage 1 --tokens "$tokens" --hw $hw \
        --routing random --seed 1 --format csv >"$OUT/moe_prefill_bench_$v.csv" 2>"$OUT/moe_prefill_bench_$v.err" || rc=1
      cut -d, -f1,7,10,12,13,18 "$OUT/moe_prefill_bench_$v.csv"
    done
  fi
fi
if [[ " $parts " == *" torchrandom "* ]]; then # the peer on benchrandom's routing (bench/torch_grouped_mm.py ports tl_route)
  echo "== torch._grouped_mm bf16, random routing seed 1"
  PYTHONUNBUFFERED=1 python3 bench/torch_grouped_mm.py --tokens "$tokens" --routing random --seed 1 \
    >"$OUT/moe_torch_random.csv" 2>"$OUT/moe_torch_random.err" || rc=1
  cut -d, -f1,4,5 "$OUT/moe_torch_random.csv"
fi
exit $rc
