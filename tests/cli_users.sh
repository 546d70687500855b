#!/usr/bin/env bash
# What users of comparable tools expect (issue 37, part B): null in JSON for a cell that does not
# apply, units in CSV column names, the timeline of the kernel sim moe models, and help texts that
# agree with each other and with what the commands do.   bash tests/cli_users.sh <tilelab> <source-dir>
set -u
tl=$1
src=${2:-.}
. "$src/tests/lib.sh"

# ---- JSON: a cell that does not apply is null, never "" ----
expect 0 "check topk --format json" -- "$tl" check topk --n 4096 --k 8 --batch 1 --seed 1 --format json
check "exact comparisons have null metrics, no empty strings anywhere" -- python3 -c '
import json, sys
rows = json.load(sys.stdin)
exact = [r for r in rows if r["notes"].startswith("all ")]
assert exact and all(r[k] is None for r in exact for k in ("max_abs", "max_rel", "rel_rms", "nmse", "tol_rel_rms", "nan")), exact[0]
assert not [(r["case"], k) for r in rows for k, v in r.items() if v == ""]' <<<"$LAST_OUT"
expect 0 "check topk --format csv" -- "$tl" check topk --n 4096 --k 8 --batch 1 --seed 1 --format csv
check "CSV keeps such a cell empty" -- grep -q "reference vs naive: idx,,,,,,,pass," <<<"$LAST_OUT"
expect 0 "hw show --format json-able table (csv)" -- "$tl" hw show h100 --format csv
check "hw show: a scalar field has empty datasheet/measured in CSV" -- grep -q "^cus,132,,,$" <<<"$LAST_OUT"
expect 0 "models --format json" -- "$tl" models deepseek-v3.2 --format json
check "models: no empty strings" -- python3 -c '
import json, sys
assert not [k for r in json.load(sys.stdin) for k, v in r.items() if v == ""]' <<<"$LAST_OUT"

# ---- CSV: a quantity's column names its unit ----
unitless_quantity() { # HEADER: the columns that name a quantity without its unit
  tr ',' '\n' <<<"$1" | grep -E '(^|_)(measured|target|time|clock|bandwidth|latency|duration)$' | grep -v '^meets_' || true; }
for cmd in "hw list" "bench numerics --n 1024 --runs 1" "sim moe --hw h100 --tokens 4" "sim topk" "sim indexer --rows 256 --kv 256" \
           "sim decode" "sim quant --rows 1 --k 128" "sim prefill --seq 256" "sim paged-decode --gqa 8 --kv-heads 8 --batch 1 --seq 1024" \
           "sim dispatch --tokens 1" "numerics quantize --scheme fp8_block128 --n 1024 --seed 1" "models" \
           "mfma list --arch gfx950"; do
  expect 0 "$cmd --format csv" -- $tl $cmd --format csv
  h=$(head -1 <<<"$LAST_OUT")
  check "$cmd: every quantity column has its unit ($(unitless_quantity "$h" | tr '\n' ' '))" -- test -z "$(unitless_quantity "$h")"
done
expect 0 "hw list csv" -- "$tl" hw list --format csv
check "hw list: measured ceilings in GB/s and TFLOP/s by name" -- \
  grep -q "^name,arch,cus,xcds,clock_mhz,hbm_gb,hbm_read_gbps,hbm_read_measured_gbps,bf16_tflops,bf16_measured_tflops," <<<"$LAST_OUT"

# ---- draw timeline draws the kernel sim moe models by default ----
expect 0 "draw timeline (default)" -- "$tl" draw timeline --tokens 8 -o "$tmp/def.png"
expect 0 "draw timeline --kernel tilelab" -- "$tl" draw timeline --tokens 8 --kernel tilelab -o "$tmp/til.png"
expect 0 "draw timeline --kernel generic" -- "$tl" draw timeline --tokens 8 --kernel generic -o "$tmp/gen.png"
check "the default is tilelab's kernel" -- cmp -s "$tmp/def.png" "$tmp/til.png"
check "and not the generic one" -- bash -c '! cmp -s "$1" "$2"' _ "$tmp/def.png" "$tmp/gen.png"
expect 2 "--tile-m without --kernel generic" -- "$tl" draw timeline --tile-m 32 -o "$tmp/x.png"
check "says to add --kernel generic" -- grep -q "add --kernel generic" <<<"$LAST_ERR"
expect 2 "--kernel other" -- "$tl" draw timeline --kernel other -o "$tmp/x.png"
expect 2 "a schedule too large for the default kernel" -- "$tl" draw timeline --tokens 200000 -o "$tmp/x.png"
check "its advice is not the generic kernel's --tile-m" -- bash -c '! grep -q -- "--tile-m" <<<"$1"' _ "$LAST_ERR"
expect 2 "a schedule too large for the generic kernel" -- "$tl" draw timeline --kernel generic --tokens 1000000 -o "$tmp/x.png"
check "there --tile-m helps" -- grep -q -- "a larger --tile-m" <<<"$LAST_ERR"
expect 0 "draw timeline --help" -- "$tl" draw timeline --help
check "the help says the default kernel" -- grep -q "tilelab (default) the kernel tilelab ships" <<<"$LAST_OUT"

# ---- help ----
expect 0 "help models" -- "$tl" help models
helped=$(tail -n +2 <<<"$LAST_OUT")
expect 0 "models --help" -- "$tl" models --help
check "help models is models --help" -- test "$helped" = "$LAST_OUT"
for c in tour numerics hw sim draw mfma ops check run bench; do
  expect 0 "help $c" -- "$tl" help $c
  helped=$(tail -n +2 <<<"$LAST_OUT")
  expect 0 "$c --help" -- "$tl" $c --help
  check "help $c is $c --help" -- test "$helped" = "$LAST_OUT"
done
expect 0 "help numerics" -- "$tl" help numerics
check "help numerics lists attention-error" -- grep -q "attention-error" <<<"$LAST_OUT"
expect 0 "help version" -- "$tl" help version
expect 0 "--help" -- "$tl" --help
check "the banner names the H100" -- grep -q "H100" <<<"$(head -1 <<<"$LAST_OUT")"
expect 0 "draw --help" -- "$tl" draw --help
figs=$(awk 'NR > 2 && NF { print $1 }' <<<"$LAST_OUT")
line=$(grep -F '`tilelab draw FIGURE' "$src/README.md")
for f in $figs; do check "README's figure list names $f" -- grep -qF "\`$f\`" <<<"$line"; done
expect 0 "check decode" -- "$tl" check decode --kind dual-scope --batch 2 --seq 300 --heads 16 --topk 64 --seed 1 --format csv
check "check decode's row note says what it measures" -- grep -q "worst row's rel RMS [0-9.e+-]* x tol_rel_rms (no per-row bound\|worst row's rel RMS [0-9.e+-]* x tol_rel_rms (must be <= " <<<"$LAST_OUT"
check "and not the old riddle" -- bash -c '! grep -q "x tol (bound" <<<"$1"' _ "$LAST_OUT"
expect 0 "sim prefill --hw h100" -- "$tl" sim prefill --hw h100 --seq 256 --format csv
check "sim prefill names FA-3's shape on sm_90a" -- grep -q "FlashAttention-3's shape on sm_90a" <<<"$LAST_ERR"
expect 0 "sim prefill --hw mi355x" -- "$tl" sim prefill --hw mi355x --seq 256 --format csv
check "and FA-2's on gfx950" -- grep -q "mi355x (gfx950): FlashAttention-2's shape" <<<"$LAST_ERR"
expect 0 "sim moe --help" -- "$tl" sim moe --help
check "sim moe --help lists the limiter loads" -- grep -q "loads (memory-bound" <<<"$LAST_OUT"
lims=$(grep -o 'r->limiter = [^;]*' "$src/simulator/moe.c" | grep -o '"[a-z]*"' | tr -d '"' | sort -u)
for l in $lims; do check "sim moe --help names the limiter $l" -- grep -qE "(^|[ ,:(])$l( |,|$)" <<<"$LAST_OUT"; done
finish
