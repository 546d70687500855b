#!/usr/bin/env bash
# `tilelab draw ...`: every picture command writes a valid PNG (SVG/PDF by extension); bad input
# (unknown preset, bad extension, malformed points file, missing -o, bad numbers) exits 2 with one
# 'tilelab: error:' line and leaves no file (not even a temporary one) behind.
set -u
tl=$1
src=$2
fail=0; pass=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
no_leftovers() { [ -z "$(ls -A "$tmp/out" 2>/dev/null)" ]; }

# ok DESCRIPTION FILE -- command...   (exit 0, FILE is a PNG/SVG/PDF by its extension)
ok() {
  local what=$1 file=$2; shift 3
  "$@" >"$tmp/stdout" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL: $what: exit $rc"; cat "$tmp/err"; fail=$((fail+1)); return; fi
  case "$file" in
    *.png) is_png "$file" || { echo "FAIL: $what: $file is not a PNG"; fail=$((fail+1)); return; } ;;
    *.svg) grep -q '<svg' "$file" || { echo "FAIL: $what: $file is not an SVG"; fail=$((fail+1)); return; } ;;
    *.pdf) [ "$(head -c 5 "$file")" = "%PDF-" ] || { echo "FAIL: $what: $file is not a PDF"; fail=$((fail+1)); return; } ;;
  esac
  if ls "$tmp"/*.tmp.* >/dev/null 2>&1; then echo "FAIL: $what: temporary file left"; fail=$((fail+1)); return; fi
  pass=$((pass+1))
}

# bad DESCRIPTION -- command...   (exit 2, one error line, nothing written under $tmp/out)
bad() {
  local what=$1; shift 2
  rm -rf "$tmp/out"; mkdir -p "$tmp/out"
  "$@" >"$tmp/stdout" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL: $what: exit $rc, wanted 2"; cat "$tmp/err"; fail=$((fail+1)); return; fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q '^tilelab: error: ' "$tmp/err"; then
    echo "FAIL: $what: wanted one 'tilelab: error:' line, got:"; cat "$tmp/err"; fail=$((fail+1)); return; fi
  no_leftovers || { echo "FAIL: $what: left files:"; ls -A "$tmp/out"; fail=$((fail+1)); return; }
  pass=$((pass+1))
}

d=$src/tests/data
ok "roofline preset only" "$tmp/r0.png" -- "$tl" draw roofline --hw mi355x -o "$tmp/r0.png"
ok "roofline rocprofv3 + band" "$tmp/r1.png" -- "$tl" draw roofline --hw mi355x \
  --points "$d/rocprofv3_mi355x_counter_collection.csv" --band 26:137 -o "$tmp/r1.png"
ok "roofline ncu + tilelab csv on h200" "$tmp/r2.svg" -- "$tl" draw roofline --hw h200 \
  --points "$d/ncu_h200_probe.csv" --points="$d/points_h200_torch.csv" -o "$tmp/r2.svg"
ok "simulated points for the roofline" "" -- "$tl" sim moe --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 1,32,512 --format csv
cp "$tmp/stdout" "$tmp/sim.csv"
ok "roofline with simulated points" "$tmp/r3.pdf" -- "$tl" draw roofline --hw mi355x --points "$tmp/sim.csv" -o "$tmp/r3.pdf"
ok "roofline ncu with --measured-on" "$tmp/r4.png" -- "$tl" draw roofline --hw h200 --points "$d/ncu_h200_probe.csv" --measured-on "NVIDIA H200, 2026-11-29" -o "$tmp/r4.png"
ok "moe-tiles" "$tmp/t.png" -- "$tl" draw moe-tiles --hw mi355x --model deepseek-v3.2 --tokens 1,32,512 --tile-m 16 -o "$tmp/t.png"
ok "moe-tiles kimi random" "$tmp/t2.png" -- "$tl" draw moe-tiles --model kimi-k2.6 --tokens 64 --routing random --seed 7 -o "$tmp/t2.png"
ok "padding" "$tmp/p.png" -- "$tl" draw padding --hw mi355x --experts 256,384 --topk 8 --tile-m 16,32 -o "$tmp/p.png"
ok "timeline" "$tmp/tl.png" -- "$tl" draw timeline --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 64 --stage 1 -o "$tmp/tl.png"
ok "timeline with idle CUs (M = 1, TP 8)" "$tmp/tl3.svg" -- "$tl" draw timeline --hw mi355x --tokens 1 --tp 8 --stage 1 -o "$tmp/tl3.svg"
ok "timeline stage 2 on mi300x" "$tmp/tl2.png" -- "$tl" draw timeline --hw mi300x --dtype bf16 --tokens 100 --stage 2 -o "$tmp/tl2.png"
ok "measured timeline from a trace" "$tmp/tr.png" -- "$tl" draw timeline --trace "$d/trace_h200_moe_small.csv" --stage 2 -o "$tmp/tr.png"
ok "mfma gfx950" "$tmp/m.png" -- "$tl" draw mfma --arch gfx950 --instr v_mfma_f32_16x16x32_bf16 -o "$tmp/m.png"
ok "mfma gfx942" "$tmp/m2.png" -- "$tl" draw mfma --arch gfx942 --instr v_mfma_f32_32x32x8_bf16 -o "$tmp/m2.png"
ok "help" "" -- "$tl" draw roofline --help
ok "indexer-tiles mi355x" "$tmp/it.png" -- "$tl" draw indexer-tiles --hw mi355x --heads 32 --rows 2048 --kv 32768 -o "$tmp/it.png"
ok "indexer-tiles h200 BLOCK_Q 2" "$tmp/it.svg" -- "$tl" draw indexer-tiles --hw h200 --heads 64 --rows 512 --kv 8192 --block-q 2 -o "$tmp/it.svg"
ok "indexer-tiles mi300x with a prefix" "$tmp/it.pdf" -- "$tl" draw indexer-tiles --hw mi300x --rows 1000 --kv 4096 --prefix 100 -o "$tmp/it.pdf"
ok "decode-shards dual-scope h200" "$tmp/ds.png" -- "$tl" draw decode-shards --hw h200 -o "$tmp/ds.png"
ok "decode-shards paged mi355x 1M" "$tmp/dp.svg" -- "$tl" draw decode-shards --kind paged --hw mi355x --seq 1048576 -o "$tmp/dp.svg"
ok "decode-shards edges, 9 shards" "$tmp/de.pdf" -- "$tl" draw decode-shards --seq 3000 --topk 512 --dist edges --shards 9 -o "$tmp/de.pdf"
ok "decode-shards measured (H200 trace)" "$tmp/dt.png" -- "$tl" draw decode-shards --trace "$src/bench/results/h200_decode_trace_run53.csv" --batch 8 -o "$tmp/dt.png"
printf 'kind,kv,batch,heads,window,topk,shards,launch,block,row,hblock,shard,sm,entry_us,ready_us,landed_us,tiles_us,end_us,run_end_us,source\ndual-scope,fp8,1,128,128,512,2,shard,0,0,0,0,3,1.5,x,3,4,5,9,here\n' >"$tmp/bad_dtrace.csv"
bad "decode trace with a malformed time" -- "$tl" draw decode-shards --trace "$tmp/bad_dtrace.csv" -o "$tmp/out/dt.png"
bad "decode trace without that case" -- "$tl" draw decode-shards --trace "$src/bench/results/h200_decode_trace_run53.csv" --batch 2 -o "$tmp/out/dt.png"
bad "decode --batch without --trace" -- "$tl" draw decode-shards --batch 2 -o "$tmp/out/dt.png"
ok "indexer-pipeline" "$tmp/ip.png" -- "$tl" draw indexer-pipeline --hw mi355x -o "$tmp/ip.png"
ok "indexer-pipeline h200" "$tmp/ip.svg" -- "$tl" draw indexer-pipeline --hw h200 --heads 64 --positions 256 --block-q 2 -o "$tmp/ip.svg"
ok "indexer-pipeline mi300x" "$tmp/ip.pdf" -- "$tl" draw indexer-pipeline --hw mi300x --positions 70 -o "$tmp/ip.pdf"

printf 'name,flops,hbm_bytes,time_us\nk,12x,5,6\n' >"$tmp/bad_points.csv"
printf 'what,ever\n1,2\n' >"$tmp/odd_points.csv"
printf 'tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us\n1,1,bf16,0,0,0,5,abc,3\n' >"$tmp/bad_trace.csv"
bad "trace with a malformed time" -- "$tl" draw timeline --trace "$tmp/bad_trace.csv" -o "$tmp/out/tr.png"
bad "trace without its columns" -- "$tl" draw timeline --trace "$tmp/odd_points.csv" -o "$tmp/out/tr.png"
bad "trace without that case" -- "$tl" draw timeline --trace "$d/trace_h200_moe_small.csv" --stage 1 -o "$tmp/out/tr.png"
bad "missing trace" -- "$tl" draw timeline --trace "$tmp/none.csv" -o "$tmp/out/tr.png"
bad "a simulated option with --trace" -- "$tl" draw timeline --trace "$d/trace_h200_moe_small.csv" --hw h200 --stage 2 -o "$tmp/out/tr.png"
printf 'tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us\n1e300,1,bf16,0,0,0,5,1,3\n' >"$tmp/huge_trace.csv"
bad "trace with an absurd token count" -- "$tl" draw timeline --trace "$tmp/huge_trace.csv" -o "$tmp/out/tr.png"
bad "unknown preset" -- "$tl" draw roofline --hw nosuchgpu -o "$tmp/out/r.png"
bad "bad extension" -- "$tl" draw roofline --hw mi355x -o "$tmp/out/r.jpg"
bad "no extension" -- "$tl" draw padding -o "$tmp/out/r"
bad "malformed points" -- "$tl" draw roofline --points "$tmp/bad_points.csv" -o "$tmp/out/r.png"
bad "unknown points header" -- "$tl" draw roofline --points "$tmp/odd_points.csv" -o "$tmp/out/r.png"
bad "missing points file" -- "$tl" draw roofline --points "$tmp/nope.csv" -o "$tmp/out/r.png"
bad "bad band" -- "$tl" draw roofline --band 137:26 -o "$tmp/out/r.png"
bad "missing -o (roofline)" -- "$tl" draw roofline --hw mi355x
bad "missing -o (moe-tiles)" -- "$tl" draw moe-tiles
bad "missing -o (padding)" -- "$tl" draw padding
bad "missing -o (timeline)" -- "$tl" draw timeline
bad "missing -o (mfma)" -- "$tl" draw mfma --instr v_mfma_f32_16x16x32_bf16
bad "missing -o (indexer-tiles)" -- "$tl" draw indexer-tiles
bad "missing -o (indexer-pipeline)" -- "$tl" draw indexer-pipeline
bad "indexer-tiles rows > kv" -- "$tl" draw indexer-tiles --rows 4096 --kv 1024 -o "$tmp/out/it.png"
bad "indexer-tiles --block-q 1" -- "$tl" draw indexer-tiles --block-q 1 -o "$tmp/out/it.png"
bad "indexer-tiles --block-q 3" -- "$tl" draw indexer-tiles --block-q 3 -o "$tmp/out/it.png"
bad "indexer-tiles heads 24" -- "$tl" draw indexer-tiles --heads 24 -o "$tmp/out/it.png"
bad "indexer-tiles kv too large" -- "$tl" draw indexer-tiles --kv 1048576 -o "$tmp/out/it.png"
bad "indexer-tiles prefix too large" -- "$tl" draw indexer-tiles --rows 100 --kv 200 --prefix 150 -o "$tmp/out/it.png"
bad "indexer-tiles unknown preset" -- "$tl" draw indexer-tiles --hw nosuchgpu -o "$tmp/out/it.png"
bad "indexer-pipeline positions 0" -- "$tl" draw indexer-pipeline --positions 0 -o "$tmp/out/ip.png"
bad "indexer-pipeline heads 40" -- "$tl" draw indexer-pipeline --heads 40 -o "$tmp/out/ip.png"
bad "indexer-pipeline --block-q 3" -- "$tl" draw indexer-pipeline --block-q 3 -o "$tmp/out/ip.png"
bad "indexer-pipeline bad extension" -- "$tl" draw indexer-pipeline -o "$tmp/out/ip.jpg"
bad "unknown option" -- "$tl" draw padding --colour red -o "$tmp/out/p.png"
bad "unknown model" -- "$tl" draw moe-tiles --model nosuchmodel -o "$tmp/out/t.png"
bad "tokens zero" -- "$tl" draw moe-tiles --tokens 0,32 -o "$tmp/out/t.png"
bad "tokens not a number" -- "$tl" draw timeline --tokens 6x4 -o "$tmp/out/tl.png"
bad "negative tile" -- "$tl" draw padding --tile-m -16 -o "$tmp/out/p.png"
bad "k larger than E" -- "$tl" draw padding --experts 4 --topk 8 -o "$tmp/out/p.png"
bad "unknown routing" -- "$tl" draw timeline --routing sideways -o "$tmp/out/tl.png"
bad "unknown mfma instruction" -- "$tl" draw mfma --arch gfx942 --instr v_mfma_nope -o "$tmp/out/m.png"
bad "unknown arch" -- "$tl" draw mfma --arch gfx1100 --instr v_mfma_f32_16x16x16_bf16 -o "$tmp/out/m.png"
# An output folder that does not exist is an I/O failure (exit 1), still with one line and no file.
rm -rf "$tmp/out"; mkdir -p "$tmp/out"
"$tl" draw padding -o "$tmp/out/no/such/dir/p.png" >/dev/null 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && no_leftovers; then pass=$((pass+1)); else
  echo "FAIL: missing folder: exit $rc"; cat "$tmp/err"; fail=$((fail+1)); fi

# shared experts: the generic timeline takes the model's (as sim moe), the tiles figure only when asked
ok "timeline with the config's shared expert" "$tmp/ts.png" -- "$tl" draw timeline --kernel generic --tokens 1 -o "$tmp/ts.png"
ok "timeline without it" "$tmp/ts0.png" -- "$tl" draw timeline --kernel generic --tokens 1 --shared 0 -o "$tmp/ts0.png"
if cmp -s "$tmp/ts.png" "$tmp/ts0.png"; then echo "FAIL: the shared expert changes nothing in the timeline"; fail=$((fail+1)); else pass=$((pass+1)); fi
ok "tiles with one shared expert" "$tmp/tl1.png" -- "$tl" draw moe-tiles --shared 1 -o "$tmp/tl1.png"
bad "--shared 17" -- "$tl" draw timeline --kernel generic --shared 17 -o "$tmp/out/x.png"
bad "--shared with --trace" -- "$tl" draw timeline --trace "$d/no.csv" --shared 1 -o "$tmp/out/x.png"

# prefill's figures (ops/prefill_figs.c), reached through the prefill op row (ops/prefill.c): a build
# without the row has no such subcommands, which this says rather than failing
if "$tl" draw prefill-tiles --help >/dev/null 2>&1; then
  ok "prefill-tiles h200" "$tmp/pt.png" -- "$tl" draw prefill-tiles -o "$tmp/pt.png"
  ok "prefill-tiles mi355x fp8 16K" "$tmp/pt.svg" -- "$tl" draw prefill-tiles --hw mi355x --dtype fp8 --seq 16384 -o "$tmp/pt.svg"
  ok "prefill-tiles mi300x MLA, not causal" "$tmp/pt.pdf" -- "$tl" draw prefill-tiles --hw mi300x --shape deepseek-v2-lite --seq 1000 --no-causal -o "$tmp/pt.pdf"
  ok "prefill-error" "$tmp/pe.png" -- "$tl" draw prefill-error --seq 128 -o "$tmp/pe.png"
  ok "prefill-roofline" "$tmp/pr.png" -- "$tl" draw prefill-roofline -o "$tmp/pr.png"
  ok "prefill-roofline with a points file" "$tmp/pr.svg" -- "$tl" draw prefill-roofline --hw h200 --shape all \
    --points "$src/bench/results/h200_prefill_sim.csv" -o "$tmp/pr.svg"
  bad "prefill-tiles without -o" -- "$tl" draw prefill-tiles
  bad "prefill-tiles seq too long" -- "$tl" draw prefill-tiles --seq 100000 -o "$tmp/out/pt.png"
  bad "prefill-tiles unknown shape" -- "$tl" draw prefill-tiles --shape llama -o "$tmp/out/pt.png"
  bad "prefill-tiles bad dtype" -- "$tl" draw prefill-tiles --dtype fp4 -o "$tmp/out/pt.png"
  bad "prefill-error too much work" -- "$tl" draw prefill-error --seq 4096 --kv-heads 8 -o "$tmp/out/pe.png"
  bad "prefill-error more KV heads than the shape" -- "$tl" draw prefill-error --kv-heads 9 -o "$tmp/out/pe.png"
  bad "prefill-roofline bad seq" -- "$tl" draw prefill-roofline --seq 1024,x -o "$tmp/out/pr.png"
  bad "prefill-roofline bad extension" -- "$tl" draw prefill-roofline -o "$tmp/out/pr.bmp"
  bad "prefill-roofline missing points file" -- "$tl" draw prefill-roofline --points "$tmp/none.csv" -o "$tmp/out/pr.png"
else
  echo "SKIP: prefill figures: this build has no prefill op row (ops/prefill.c)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
