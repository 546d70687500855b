#!/usr/bin/env bash
# Bad input to every command: malformed files, absurd numbers, options twice or without a value,
# unwritable outputs. Each case must end with exit 2 (bad input) or 1 (a failure), exactly one
# "tilelab: error: <what>: <why>" line on stderr, no sanitizer report, within 20 s, and no output
# or "*.tmp.*" file left behind. Most cases here found a defect in the bad-input sweep of 2026-11-29.
#   bash tests/cli_badinput.sh <tilelab> <source-dir>
set -u
tl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # the cases run in a scratch folder
src=$(cd "$2" && pwd)
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
mkdir -p "$out"

# run CMD...: sets RC, ERR (stderr), OUT (stdout); 20 s at most.
run() {
  OUT=$(cd "$tmp" && timeout 20 "$@" 2>"$tmp/err" </dev/null)
  RC=$?
  ERR=$(cat "$tmp/err")
}

report() { # report OK DESCRIPTION WHY
  if [ "$1" -eq 1 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: $2: $3"
    [ -n "$ERR" ] && printf '%s\n' "$ERR" | head -5
  fi
}

# Problems every case checks: a hang, a sanitizer report, a leftover temporary file.
common() {
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then echo "hang (over 20 s)"; return; fi
  if grep -qE 'Sanitizer|runtime error:' <<<"$ERR"; then echo "sanitizer report"; return; fi
  local left
  left=$(find "$tmp" -name '*.tmp.*' | head -1)
  if [ -n "$left" ]; then rm -f "$left"; echo "left $left behind"; return; fi
  echo ""
}

# bad CODE DESCRIPTION -- CMD...: exit CODE and exactly one error line.
bad() {
  local want=$1 what=$2
  shift 3
  run "$@"
  local why
  why=$(common)
  if [ -z "$why" ] && [ "$RC" -ne "$want" ]; then why="exit $RC, wanted $want"; fi
  if [ -z "$why" ] && { [ "$(printf '%s\n' "$ERR" | grep -c .)" -ne 1 ] ||
    ! grep -qE '^tilelab: error: .+: .+' <<<"$ERR"; }; then why="wanted one 'tilelab: error: <what>: <why>' line"; fi
  [ -z "$why" ]
  report $((1 - $?)) "$what" "$why"
}

# good DESCRIPTION -- CMD...: exit 0, nothing on stderr.
good() {
  local what=$1
  shift 2
  run "$@"
  local why
  why=$(common)
  if [ -z "$why" ] && [ "$RC" -ne 0 ]; then why="exit $RC"; fi
  [ -z "$why" ]
  report $((1 - $?)) "$what" "$why"
}

# absent FILE DESCRIPTION: a failed command left no output file.
absent() {
  ERR=""
  [ ! -e "$1" ]
  report $((1 - $?)) "$2" "$1 exists"
}

# ---- files the cases read ----
# hwjson NAME CUS CEILINGS: a small hardware preset; CEILINGS is the text after "ceilings": (or "").
hwjson() {
  local ceil=""
  [ -n "$3" ] && ceil="\"ceilings\": $3,"
  printf '{"name": "%s", "arch": "sm_90", "cus": %s, "clock_mhz": 1830, "wave_size": 32, "matrix_cores_per_cu": 4, "lds_kib": 228, "l2_mib_per_xcd": 60, "hbm_gb": 141, "launch_us": 4, "item_fixed_us": 0.5, "hbm_per_cu_gbps": 55, %s "matrix_instructions": [{"name": "m16n8k16", "m": 16, "n": 8, "k": 16, "a": "bf16", "b": "bf16", "cycles": 4}]}\n' "$1" "$2" "$ceil"
}
C='{"hbm_read_gbps": {"datasheet": 4800}, "bf16_tflops": {"datasheet": 989}}'
hwjson mini 132 "$C" >"$tmp/hw_ok.json"
hwjson mini 132 "" >"$tmp/hw_noceil.json"
hwjson mini 132 '[1, 2]' >"$tmp/hw_ceilarray.json"
hwjson mini 132 '{"bf16_tflops": {"datasheet": 989}}' >"$tmp/hw_nohbm.json"
hwjson mini 132 '{"hbm_read_gbps": {"datasheet": "fast"}}' >"$tmp/hw_ceilstr.json"
hwjson mini '"132"' "$C" >"$tmp/hw_cusstr.json"
hwjson mini 2147483648 "$C" >"$tmp/hw_cusbig.json"
hwjson "" 132 "$C" >"$tmp/hw_noname.json"
hwjson mini '132, "cus": 64' "$C" >"$tmp/hw_dupkey.json"
printf '{"name": "mini", "cus": ' >"$tmp/hw_trunc.json"
printf '{"ceilings": {"bf16_tflops": {"measured": "fast"}}}\n' >"$tmp/overlay_bad.json"

# model NAME EXTRA: a DeepSeek-like config.json with EXTRA fields replacing the defaults.
model() {
  local hidden=7168 experts=256 topk=8
  eval "$2"
  printf '{"tilelab_name": %s, "hidden_size": %s, "num_hidden_layers": 61, "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": %s, "num_experts_per_tok": %s}\n' \
    "$1" "$hidden" "$experts" "$topk"
}
model '"m"' 'hidden=\"7168\"' >"$tmp/m_hiddenstr.json"
model '"m"' 'hidden=-7168' >"$tmp/m_hiddenneg.json"
model '"m"' 'experts=0' >"$tmp/m_experts0.json"
model '"m"' 'topk=300' >"$tmp/m_topkbig.json"
model '"m"' 'topk=0' >"$tmp/m_topk0.json"
model '"a\nb"' '' >"$tmp/m_ctrlname.json"
model '""' '' >"$tmp/m_emptyname.json"
model '"m"' 'hidden=100000000' >"$tmp/m_huge.json"
model '"m"' 'experts=1000000 topk=1000000' >"$tmp/m_wide.json"

printf '0,1,2,3,4,5,6,256\n' >"$tmp/tr_range.csv"
printf '0,1,2,3,4,5,6,99999999999\n' >"$tmp/tr_huge.csv"
printf '0,1,2,3,4,5,6\n' >"$tmp/tr_short.csv"
printf '0,1,2,3,4,5,6,7\0,9\n' >"$tmp/tr_nul.csv"
printf 'x,y\n' >"$tmp/tr_text.csv"
mkdir -p "$tmp/tr_dir"

printf 'name,flops,hbm_bytes\nk,1e12,1e9\n' >"$tmp/p_nocol.csv"
printf 'name,flops,hbm_bytes,time_us\nk,1e12\n' >"$tmp/p_short.csv"
printf 'name,flops,hbm_bytes,time_us\nk,nan,1e9,10\n' >"$tmp/p_nan.csv"
printf 'name,flops,hbm_bytes,time_us\nk,1e12,-1,10\n' >"$tmp/p_neg.csv"
printf '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n"0","k","gpu__time_duration.sum","furlong","5"\n' >"$tmp/p_unit.csv"
mkdir -p "$tmp/p_dir.csv"
{ echo "name,flops,hbm_bytes,time_us"; seq 1 4097 | sed 's/.*/k&,1e12,1e9,10/'; } >"$tmp/p_many.csv"

printf '{"ceilings": {"bf16_tflops": {"measured": 700}}, "clocks": {"sm_mhz": 1e300}}\n' >"$tmp/rf_clock.json"
printf '{"ceilings": {"bf16_tflops": {"measured": 700}}, "configurations": [{"ceiling": "bf16_tflops", "median_ms": 0, "flops": 1e12}]}\n' >"$tmp/rf_zero.json"
printf '{"ceilings": {}}\n' >"$tmp/rf_empty.json"
echo "a file, not a folder" >"$tmp/afile"

# ---- the command frame ----
bad 2 "no command" -- "$tl"
bad 2 "group without a subcommand" -- "$tl" sim
bad 2 "mfma without a subcommand" -- "$tl" mfma
good "hw list --help" -- "$tl" hw list --help
good "hw show --help" -- "$tl" hw show --help
bad 1 "stdout on a full disk" -- sh -c "\"$tl\" hw list >/dev/full"

# ---- options given twice, or without a value at the end of argv ----
bad 2 "convert --to twice" -- "$tl" numerics convert --to e4m3fn --to e5m2
bad 2 "convert --saturate and --no-saturate" -- "$tl" numerics convert --to e4m3fn --saturate --no-saturate
bad 2 "table --format twice" -- "$tl" numerics table e2m1 --format csv --format json
bad 2 "quantize --scheme twice" -- "$tl" numerics quantize --scheme mxfp4 --scheme mxfp8_e4m3
bad 2 "bench numerics --runs twice" -- "$tl" bench numerics --runs 1 --runs 2
bad 2 "hw list --format twice" -- "$tl" hw list --format csv --format json
bad 2 "sim moe --tokens twice" -- "$tl" sim moe --tokens 1 --tokens 2
bad 2 "paged-decode --gqa twice" -- "$tl" sim paged-decode --gqa 1 --gqa 2 --batch 1 --seq 1 --kv-heads 1
bad 2 "mfma list --arch twice" -- "$tl" mfma list --arch gfx942 --arch gfx950
bad 2 "bench roofline --from twice" -- "$tl" bench roofline --from a.json --from b.json
bad 2 "draw -o twice" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16 -o "$out/a.png" -o "$out/b.png"
check_dash_o() { grep -q "'-o' given twice" <<<"$ERR"; }
check_dash_o
report $((1 - $?)) "-o named as -o" "message: $ERR"
bad 2 "tour --out twice" -- "$tl" tour --out "$out/t1" --out "$out/t2"
absent "$out/t1" "tour --out twice created nothing"
bad 2 "tour --out without value" -- "$tl" tour --out
bad 2 "sim moe option at the end" -- "$tl" sim moe --tokens
bad 2 "quantize --seed at the end" -- "$tl" numerics quantize --scheme mxfp4 --seed

# ---- the shared option reader (cli/opts.c): --name=value, empty values, flags, repeatables ----
good "--name=value form" -- "$tl" sim moe --tokens=8 --stage=1 --format=csv
bad 2 "--name= (empty value)" -- "$tl" sim moe --hw=
bad 2 "empty value" -- "$tl" tour --out ""
absent "$tmp/tilelab-tour" "tour with an empty --out created nothing"
bad 2 "a flag given a value" -- "$tl" numerics convert --to e4m3fn --saturate=1
bad 2 "--saturate then --no-saturate" -- "$tl" numerics convert --to e4m3fn --no-saturate --saturate
grep -q "exclude each other" <<<"$ERR"
report $((1 - $?)) "flags of one choice named as such" "message: $ERR"
bad 2 "a ninth --points" -- "$tl" draw roofline --points a --points b --points c --points d --points e \
  --points f --points g --points h --points i -o "$out/r9.png"
absent "$out/r9.png" "draw roofline with nine --points wrote nothing"
bad 2 "a second positional argument" -- "$tl" hw show mi355x h200
bad 2 "a positional argument where none is taken" -- "$tl" bench sim extra
bad 2 "an unknown single-dash option" -- "$tl" check moe -x

# ---- numbers: malformed, negative, NaN, huge, empty ----
bad 2 "--n 2147483648" -- "$tl" numerics quantize --scheme mxfp4 --n 2147483648
bad 2 "--n negative" -- "$tl" numerics quantize --scheme mxfp4 --n -5
bad 2 "--n empty" -- "$tl" numerics quantize --scheme mxfp4 --n ""
bad 2 "random rotation of rows of 8192 (minutes of QR)" -- "$tl" numerics quantize --scheme fp8_block128 --rotate random --row 8192 --n 8192
bad 2 "--tokens 99999999999" -- "$tl" sim moe --tokens 99999999999
bad 2 "--tokens ," -- "$tl" sim moe --tokens ,
bad 2 "--experts 0" -- "$tl" draw padding --experts 0 -o "$out/pad.png"
absent "$out/pad.png" "draw padding with a bad list wrote nothing"
bad 2 "--tokens over the routed-row limit" -- "$tl" sim moe --tokens 16777216
bad 2 "--tokens adding up over the limit" -- "$tl" sim moe --tokens 2097152,2097152,2097152
bad 2 "--cu-gbps nan" -- "$tl" sim moe --cu-gbps nan
bad 2 "--tile-n 0" -- "$tl" sim moe --tile-n 0
bad 2 "--seq 2147483648" -- "$tl" sim paged-decode --gqa 1 --batch 1 --seq 2147483648 --kv-heads 1
bad 2 "--band nan" -- "$tl" draw roofline --band nan:5 -o "$out/band.png"
absent "$out/band.png" "draw roofline with a bad band wrote nothing"

# ---- absurd shapes that used to run for minutes ----
bad 2 "tile-n 1 against hidden 1e8 (hours of waves)" -- "$tl" sim moe --model "$tmp/m_huge.json" --tile-n 1 --tokens 1000000 --stage 2
bad 2 "timeline of 16M work items" -- "$tl" draw timeline --tokens 1000000 -o "$out/tl.png"
absent "$out/tl.png" "draw timeline too large wrote nothing"
bad 2 "padding curves of 3e8 routed rows" -- "$tl" draw padding --experts 65536 --topk 1024 --tile-m 4096 --max-tokens 100000 -o "$out/pad2.png"
absent "$out/pad2.png" "draw padding too large wrote nothing"

# ---- hardware presets ----
good "a small valid preset" -- "$tl" hw show "$tmp/hw_ok.json"
bad 2 "truncated JSON" -- "$tl" hw show "$tmp/hw_trunc.json"
bad 2 "no ceilings" -- "$tl" sim moe --hw "$tmp/hw_noceil.json"
bad 2 "ceilings an array" -- "$tl" hw show "$tmp/hw_ceilarray.json"
check_msg() { grep -q "$1" <<<"$ERR"; }
check_msg "must be an object"
report $((1 - $?)) "ceilings array named as such" "message: $ERR"
bad 2 "no HBM ceiling" -- "$tl" draw roofline --hw "$tmp/hw_nohbm.json" -o "$out/r.png"
absent "$out/r.png" "draw roofline with a bad preset wrote nothing"
bad 2 "ceiling a string" -- "$tl" hw show "$tmp/hw_ceilstr.json"
bad 2 "cus a string" -- "$tl" hw show "$tmp/hw_cusstr.json"
bad 2 "cus 2^31" -- "$tl" hw show "$tmp/hw_cusbig.json"
bad 2 "empty name" -- "$tl" hw show "$tmp/hw_noname.json"
bad 2 "a key given twice" -- "$tl" hw show "$tmp/hw_dupkey.json"
bad 2 "a folder" -- "$tl" hw show "$tmp/"
bad 2 "h200,nonexistent.json" -- "$tl" hw show h200,nonexistent.json
bad 2 "overlay with a string ceiling" -- "$tl" sim moe --hw "h200,$tmp/overlay_bad.json"

# ---- model configs ----
bad 2 "hidden_size a string" -- "$tl" sim moe --model "$tmp/m_hiddenstr.json"
bad 2 "hidden_size negative" -- "$tl" models "$tmp/m_hiddenneg.json"
bad 2 "0 experts with top-k 8" -- "$tl" sim moe --model "$tmp/m_experts0.json"
bad 2 "top-k > experts" -- "$tl" sim moe --model "$tmp/m_topkbig.json"
bad 2 "top-k 0" -- "$tl" models "$tmp/m_topk0.json"
bad 2 "a newline in the name" -- "$tl" models "$tmp/m_ctrlname.json"
good "an empty name falls back to the file's" -- "$tl" models "$tmp/m_emptyname.json" --format csv
check_msg_out() { grep -q "^m_emptyname," <<<"$OUT"; }
check_msg_out
report $((1 - $?)) "fallback name" "output: $OUT"

# ---- routing traces ----
bad 2 "trace id out of range" -- "$tl" sim moe --routing "trace:$tmp/tr_range.csv" --tokens 4
bad 2 "trace id 99999999999" -- "$tl" sim moe --routing "trace:$tmp/tr_huge.csv" --tokens 4
bad 2 "trace with k-1 ids" -- "$tl" sim moe --routing "trace:$tmp/tr_short.csv" --tokens 4
bad 2 "trace with a NUL byte" -- "$tl" sim moe --routing "trace:$tmp/tr_nul.csv" --tokens 4
bad 2 "trace of words" -- "$tl" sim moe --routing "trace:$tmp/tr_text.csv" --tokens 4
bad 2 "trace a folder" -- "$tl" sim moe --routing "trace:$tmp/tr_dir" --tokens 4
bad 2 "trace missing" -- "$tl" draw timeline --routing "trace:$tmp/none.csv" -o "$out/t.png"
absent "$out/t.png" "draw timeline with a missing trace wrote nothing"

# ---- roofline points ----
for f in nocol short nan neg unit dir many; do
  ext=csv
  bad 2 "points file $f" -- "$tl" draw roofline --points "$tmp/p_$f.$ext" -o "$out/p_$f.png"
  absent "$out/p_$f.png" "draw roofline with points $f wrote nothing"
done

# bench roofline --points rows: matrix loops move no bytes, HBM kernels do no FLOPs
printf 'kernel,flops,hbm_bytes,time_us\nmma,1e12,0,100\nhbm,0,1e9,100\n' >"$tmp/p_unplaceable.csv"
printf 'kernel,flops,hbm_bytes,time_us\nmma,1e12,0,100\nmoe,1e12,1e9,100\n' >"$tmp/p_some.csv"
bad 2 "points without a placeable row" -- "$tl" draw roofline --points "$tmp/p_unplaceable.csv" -o "$out/pu.png"
absent "$out/pu.png" "draw roofline without placeable points wrote nothing"
good "points with one unplaceable row left out" -- "$tl" draw roofline --points "$tmp/p_some.csv" -o "$out/ps.png"

# ---- outputs ----
bad 1 "picture in a missing folder" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16 -o "$tmp/none/x.png"
check_msg "$tmp/none/x.png: cannot create the file: "
report $((1 - $?)) "names the picture, not its temporary file" "message: $ERR"
mkdir -p "$out/isdir.png"
bad 2 "picture onto a folder" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16 -o "$out/isdir.png"
bad 2 "picture .gif" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16 -o "$out/x.gif"
bad 2 "-o empty" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16 -o ""
bad 2 "tour --out a file" -- "$tl" tour --out "$tmp/afile"
bad 1 "overlay saved into a missing folder" -- "$tl" bench roofline --from "$src/presets/hw/h200.json" --save "$tmp/none/o.json"
bad 1 "--save and --points land together: the points fail" -- "$tl" bench roofline --from "$src/bench/results/2026-11-29_h200_roofline.json" --hw h200 --save "$out/both.json" --points "$tmp/none/both.csv"
[ ! -e "$out/both.json" ]
report $((1 - $?)) "no overlay is left when the points file fails" "$out/both.json exists"

# ---- bench roofline --from ----
bad 2 "--from missing" -- "$tl" bench roofline --from "$tmp/none.json"
bad 2 "--from clock 1e300" -- "$tl" bench roofline --from "$tmp/rf_clock.json"
bad 2 "--from median 0" -- "$tl" bench roofline --from "$tmp/rf_zero.json" --points "$out/rf.csv"
absent "$out/rf.csv" "--from with a bad result wrote no points"
bad 2 "--from without measured ceilings" -- "$tl" bench roofline --from "$tmp/rf_empty.json"

# ---- stdin of numerics convert ----
run sh -c "printf '1.5\nabc\n' | \"$tl\" numerics convert --to e4m3fn"
[ "$RC" -eq 2 ] && [ -z "$OUT" ] && [ "$(printf '%s\n' "$ERR" | grep -c .)" -eq 1 ]
report $((1 - $?)) "convert: a bad line, nothing printed" "exit $RC, out '$OUT'"
run sh -c "printf '1.5\n\033[2J\n' | \"$tl\" numerics convert --to e4m3fn"
[ "$RC" -eq 2 ] && grep -q "not text" <<<"$ERR"
report $((1 - $?)) "convert: control bytes are not text" "exit $RC"

# ---- an interrupted writer leaves no temporary file ----
run timeout -s TERM 1 "$tl" draw timeline --kernel generic --tokens 200000 -o "$out/sig.png"
left=$(find "$out" -name 'sig.png.tmp.*' | head -1)
[ "$RC" -eq 124 ] && [ -z "$left" ] # 124: the signal ended it mid-run (a quick exit would test nothing)
report $((1 - $?)) "SIGTERM removes the temporary picture" "exit $RC, left '$left'"

# ---- the audit of 2026-11-29 21:00 UTC: each case below was a defect ----
# --cu-gbps 1e-300 and preset rates of 1e-300 made times of 1e62 us (inf) and an empty roofline
bad 2 "--cu-gbps 1e-300" -- "$tl" sim moe --cu-gbps 1e-300 --tokens 1
hwjson mini 132 '{"hbm_read_gbps": {"datasheet": 1e-300}}' >"$tmp/hw_tinyceil.json"
bad 2 "a ceiling of 1e-300 GB/s" -- "$tl" sim paged-decode --hw "$tmp/hw_tinyceil.json" --gqa 1 --batch 1 --seq 1 --kv-heads 1
# worklists of 2^31 routed rows (minutes, gigabytes) behind draw timeline and draw moe-tiles
bad 2 "timeline of 2^31 routed rows" -- "$tl" draw timeline --tokens 268435455 -o "$out/big.png"
check_msg "routed rows" # the picture's own limit, not the worklist's 2^31 after 12 s
report $((1 - $?)) "timeline of 2^31 rows refused by the picture's row limit" "message: $ERR"
absent "$out/big.png" "draw timeline of 2^31 rows wrote nothing"
bad 2 "moe-tiles of 1e6 experts x top-1e6" -- "$tl" draw moe-tiles --model "$tmp/m_wide.json" -o "$out/wide.png"
# a routing trace that is a device: one endless line read into memory
bad 2 "trace /dev/zero" -- "$tl" sim moe --routing trace:/dev/zero --tokens 4
# points far off any roofline (an infinite intensity emptied the axes), a band of 1e-300
printf 'name,flops,hbm_bytes,time_us\nk,1e300,1e-300,1e-300\n' >"$tmp/p_inf.csv"
bad 2 "points of infinite intensity" -- "$tl" draw roofline --points "$tmp/p_inf.csv" -o "$out/pinf.png"
# a trace with its header only: say so, not "M = 0"
printf 'tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us,source\n' >"$tmp/trace_empty.csv"
bad 2 "a trace of its header only" -- "$tl" draw timeline --trace "$tmp/trace_empty.csv" -o "$out/te.png"
check_msg "no data rows"
report $((1 - $?)) "an empty trace named as such" "message: $ERR"
# but a compute loop whose operands stay in L2 (1.1e9 FLOP/B) is a point like any other
printf 'name,flops,hbm_bytes,time_us\nl2_loop,1.1e12,1000,2000\n' >"$tmp/p_l2.csv"
good "a point of 1.1e9 FLOP/B" -- "$tl" draw roofline --hw h200 --points "$tmp/p_l2.csv" -o "$out/pl2.png"
absent "$out/pinf.png" "draw roofline with an infinite point wrote nothing"
bad 2 "--band 1e-300:1e-299" -- "$tl" draw roofline --band 1e-300:1e-299 -o "$out/pb.png"
# a kernel name with a quoted newline split the error in two lines
printf '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n"0","k\nx","gpu__time_duration.sum","us","5"\n' >"$tmp/ncu_nl.csv"
bad 2 "ncu kernel name with a newline" -- "$tl" draw roofline --points "$tmp/ncu_nl.csv" -o "$out/nl.png"
bad 2 "an argument with a newline" -- "$tl" sim moe --tokens "$(printf '1\n2')"
# bench roofline --from: wrong JSON types were read as 0 or "", control characters were kept
R=$src/bench/results/2026-11-29_h200_roofline.json
sed 's/"device": "[^"]*"/"device": "H200\\nX"/' "$R" >"$tmp/rf_ctrl.json"
bad 2 "--from with a newline in device" -- "$tl" bench roofline --from "$tmp/rf_ctrl.json" --save "$out/ctrl.json"
absent "$out/ctrl.json" "--from with a bad device saved nothing"
sed 's/"sm_mhz": [0-9]*/"sm_mhz": "fast"/' "$R" >"$tmp/rf_str.json"
bad 2 "--from with a string clock" -- "$tl" bench roofline --from "$tmp/rf_str.json"
bad 2 "--from with --iters (measures nothing)" -- "$tl" bench roofline --from "$R" --iters 5
bad 2 "--from a folder" -- "$tl" bench roofline --from "$tmp/tr_dir"
check_msg "(a folder)"
report $((1 - $?)) "--from a folder named as such" "message: $ERR"
# --save and --points naming one file: the CSV replaced the overlay, exit 1, the file left behind
bad 2 "--save and --points one file" -- "$tl" bench roofline --from "$R" --save "$out/same" --points "$out/./same"
absent "$out/same" "--save and --points on one file left nothing"
# check/bench read --format=VALUE as the option reader does
bad 2 "check moe --format=xml" -- "$tl" check moe --format=xml
# numerics convert: /dev/zero grew one line without end; a folder read as empty input
run sh -c "\"$tl\" numerics convert --to bf16 </dev/zero"
[ "$RC" -eq 2 ] && grep -q "longer than" <<<"$ERR"
report $((1 - $?)) "convert: an endless line is refused" "exit $RC"
run sh -c "\"$tl\" numerics convert --to bf16 <\"$tmp/tr_dir\""
[ "$RC" -eq 2 ]
report $((1 - $?)) "convert: standard input a folder" "exit $RC"
# help and version: unknown names and extra words were ignored; --help > /dev/full was exit 0
bad 2 "help draw nosuch" -- "$tl" help draw nosuch
bad 2 "help numerics nosuch" -- "$tl" help numerics nosuch
bad 2 "version extra" -- "$tl" version extra
bad 1 "--help on a full disk" -- sh -c "\"$tl\" --help >/dev/full"
good "help numerics convert" -- "$tl" help numerics convert

# ---- the MoE op: exit codes only ----
bad 2 "check moe --tokens -1" -- "$tl" check moe --tokens -1
bad 2 "bench moe --stage 3" -- "$tl" bench moe --stage 3

# ---- the decode op: absurd shapes and names, exit 2 and one line ----
bad 2 "sim decode --batch -3" -- "$tl" sim decode --batch -3
bad 2 "sim decode --seq 99999999" -- "$tl" sim decode --seq 99999999
bad 2 "sim decode --kind ragged" -- "$tl" sim decode --kind ragged
bad 2 "sim decode --kv fp4" -- "$tl" sim decode --kv fp4
bad 2 "sim decode --gqa 0" -- "$tl" sim decode --gqa 0
bad 2 "sim decode --kv-heads 17" -- "$tl" sim decode --kv-heads 17
bad 2 "sim decode 1024 x 1M x 16 KV heads" -- "$tl" sim decode --batch 1024 --seq 1048576 --kv-heads 16
bad 2 "sim decode --format xml" -- "$tl" sim decode --format xml
bad 2 "sim decode --hw nosuchgpu" -- "$tl" sim decode --hw nosuchgpu
bad 2 "sim decode --kind dual-scope --heads 24" -- "$tl" sim decode --kind dual-scope --heads 24
bad 2 "sim decode --kind dual-scope --mtp 0" -- "$tl" sim decode --kind dual-scope --mtp 0
bad 2 "sim decode --kind dual-scope --window -1" -- "$tl" sim decode --kind dual-scope --window -1
bad 2 "sim decode --kind dual-scope --topk 1e9" -- "$tl" sim decode --kind dual-scope --topk 1e9
bad 2 "check decode --shards 1000" -- "$tl" check decode --shards 1000
bad 2 "check decode --lens with --batch" -- "$tl" check decode --lens 1,2 --batch 2
bad 2 "check decode --lens 5,x" -- "$tl" check decode --lens 5,x
bad 2 "check decode --scale -1" -- "$tl" check decode --scale -1
bad 2 "check decode --dist zipf" -- "$tl" check decode --dist zipf
bad 2 "check decode --input nosuch=f.npy" -- "$tl" check decode --input "nosuch=$tmp/f.npy"
bad 2 "run decode --input q=missing" -- "$tl" run decode --input "lens=$tmp/none.npy" --input "q=$tmp/none.npy" --input "k=$tmp/none.npy" --output "o=$out/o.npy"
absent "$out/o.npy" "run decode on a missing file left no output"
bad 2 "bench decode --batch 0" -- "$tl" bench decode --batch 0
bad 2 "draw decode-shards without -o" -- "$tl" draw decode-shards
bad 2 "draw decode-shards --shards 65" -- "$tl" draw decode-shards --shards 65 -o "$out/ds.png"
bad 2 "draw decode-shards --seq 0" -- "$tl" draw decode-shards --seq 0 -o "$out/ds.png"
bad 2 "draw decode-shards --kind nope" -- "$tl" draw decode-shards --kind nope -o "$out/ds.png"
bad 2 "draw decode-shards .jpg" -- "$tl" draw decode-shards -o "$out/ds.jpg"
absent "$out/ds.png" "a refused decode picture left no file"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
