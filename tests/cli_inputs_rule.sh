#!/usr/bin/env bash
# One rule for the inputs (issue 37, part B, "Inputs"): every number in an option, a CSV field or a
# trace field is decimal text and nothing else (no blanks, no '+', no hex, all of it); a .npy header
# is numpy's dict and nothing else; a text input may start with a UTF-8 byte-order mark; every
# reader numbers lines from 1.   bash tests/cli_inputs_rule.sh <tilelab> <source-dir>
set -u
tl=$1
src=${2:-.}
. "$src/tests/lib.sh"

# ---- numbers in options: one rule in every command ----
for v in " 5" "5 " "+5" "0x10" "1e3" "5.0"; do
  expect 2 "sim moe --tokens '$v'" -- "$tl" sim moe --hw h100 --tokens "$v"
  check "--tokens '$v': says decimal" -- grep -q "is not an integer (decimal digits only)" <<<"$LAST_ERR"
done
for v in "0x10" " 16" "+16" "16 " "-1" "010x"; do
  expect 2 "sim moe --seed '$v'" -- "$tl" sim moe --hw h100 --tokens 4 --seed "$v"
  check "sim moe: the seed is refused" -- grep -q "^tilelab: error: --seed: " <<<"$LAST_ERR"
  expect 2 "check topk --seed '$v'" -- "$tl" check topk --n 4096 --k 8 --batch 1 --seed "$v"
  check "check topk: the seed is refused" -- grep -q "^tilelab: error: --seed: " <<<"$LAST_ERR"
  expect 2 "numerics quantize --seed '$v'" -- "$tl" numerics quantize --scheme fp8_block128 --n 1024 --seed "$v"
  check "numerics quantize: the seed is refused" -- grep -q "^tilelab: error: --seed: " <<<"$LAST_ERR"
done
expect 0 "sim moe --seed 16" -- "$tl" sim moe --hw h100 --tokens 4 --seed 16 --format csv
check "seed 16 is 16" -- test "$(awk -F, 'NR==2{print $8}' <<<"$LAST_OUT")" = "16"
expect 0 "numerics quantize --seed 16" -- "$tl" numerics quantize --scheme fp8_block128 --n 1024 --seed 16 --format csv
expect 2 "a real option in hex" -- "$tl" sim moe --hw h100 --tokens 4 --routing zipf:0x1p0
expect 2 "a real option with a blank" -- "$tl" sim moe --hw h100 --tokens 4 --routing "zipf: 1.2"
expect 0 "a real option in decimal" -- "$tl" sim moe --hw h100 --tokens 4 --routing zipf:1.2 --format csv
expect 2 "prefill --tile with a '+'" -- "$tl" sim prefill --tile "128x+128x8"
expect 2 "prefill --tile with a blank" -- "$tl" sim prefill --tile "128x 128x8"

# ---- numbers in CSV fields: hex FLOPs, blanks and '+' are malformed ----
pts() { printf 'flops,hbm_bytes,time_us,label\n%s,1000000,10,a\n' "$1" >"$tmp/p.csv"; }
for v in "0x10000000" " 100000000" "100000000 " "+100000000" "inf"; do
  pts "$v"
  expect 2 "--points flops '$v'" -- "$tl" draw roofline --points "$tmp/p.csv" -o "$tmp/p.svg"
  check "--points flops '$v': line 2, malformed" -- grep -q "line 2: malformed number" <<<"$LAST_ERR"
done
pts '"100,000,000"'
expect 0 "--points with ncu's thousands separators still reads" -- "$tl" draw roofline --points "$tmp/p.csv" -o "$tmp/p.svg"

# ---- numbers in a routing trace ----
printf '0 3\n+1 2\n' >"$tmp/plus.txt"
printf '0 3\n0x1 2\n' >"$tmp/hex.txt"
printf '0 3 0.5 0x1p-1\n' >"$tmp/hexw.txt"
e8=(--model "$tmp/e8k2.json" --hw h100)
printf '{"hidden_size": 256, "num_hidden_layers": 2, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256}\n' >"$tmp/e8k2.json"
expect 2 "trace id '+1'" -- "$tl" sim moe "${e8[@]}" --routing "trace:$tmp/plus.txt"
check "names line 2" -- grep -q "plus.txt:2: expert id '+1' is not an integer" <<<"$LAST_ERR"
expect 2 "trace id '0x1'" -- "$tl" sim moe "${e8[@]}" --routing "trace:$tmp/hex.txt"
expect 2 "trace weight in hex" -- "$tl" sim moe "${e8[@]}" --routing "trace:$tmp/hexw.txt"
check "names line 1" -- grep -q "hexw.txt:1: weight '0x1p-1' is not a number" <<<"$LAST_ERR"

# ---- a UTF-8 byte-order mark before a routing trace and before numerics convert's input ----
{ printf '\xef\xbb\xbf'; cat "$src/tests/data/routing/good_e8k2.txt"; } >"$tmp/bom.txt"
expect 0 "a routing trace with a BOM" -- "$tl" sim moe "${e8[@]}" --routing "trace:$tmp/bom.txt" --format csv
printf '\xef\xbb\xbf1 9\n' >"$tmp/bombad.txt"
expect 2 "a bad trace with a BOM: the message has no invisible character" -- "$tl" sim moe "${e8[@]}" --routing "trace:$tmp/bombad.txt"
check "its message starts at the id" -- grep -q "bombad.txt:1: expert id 9 outside \[0, 8)" <<<"$LAST_ERR"
check "and holds no BOM" -- bash -c '! grep -q $'"'"'\xef\xbb\xbf'"'"' <<<"$1"' _ "$LAST_ERR"
run_convert() { printf '\xef\xbb\xbf1.5\n' | "$tl" numerics convert --to e4m3fn; }
expect 0 "numerics convert after a BOM" -- run_convert
check "converts the first line" -- test "$LAST_OUT" = "1.5 0x3C 1.5"

# ---- every CSV trace reader numbers lines from 1 (the header is line 1) ----
printf 'kind,kv,batch,heads,window,topk,shards,launch,block,row,hblock,shard,sm,entry_us,ready_us,landed_us,tiles_us,end_us,run_end_us,source\ndual-scope,fp8,1,128,128,512,2,shard,0,0,0,0,3,1.5,x,3,4,5,9,here\n' >"$tmp/dtrace.csv"
expect 2 "decode-shards --trace, a bad time on line 2" -- "$tl" draw decode-shards --trace "$tmp/dtrace.csv" -o "$tmp/d.png"
check "decode-shards says line 2" -- grep -q "dtrace.csv: line 2: ready_us 'x'" <<<"$LAST_ERR"
printf 'dtype,batch,n,k,split,row,chunk,sm,passes,entry_us,loaded_us,hist0_us,select0_us,hist1_us,select1_us,hist2_us,select2_us,counted_us,placed_us,end_us,run_end_us,source\nf32,1,4096,512,1,0,0,124,2,2.016,x,5.906,6.599,7.682,8.373,8.373,8.373,9.157,11.724,12.014,13.888,here\n' >"$tmp/ttrace.csv"
expect 2 "topk-split --trace, a bad time on line 2" -- "$tl" draw topk-split --trace "$tmp/ttrace.csv" --n 4096 -o "$tmp/t.png"
check "topk-split says line 2" -- grep -q "ttrace.csv: line 2: loaded_us 'x'" <<<"$LAST_ERR"
printf 'tokens,stage,dtype,block,sm,start_us,end_us\n4,1,fp8,0,0,x,2\n' >"$tmp/mtrace.csv"
expect 2 "timeline --trace, a bad time on line 2" -- "$tl" draw timeline --trace "$tmp/mtrace.csv" -o "$tmp/m.png"
check "timeline says line 2" -- grep -q "mtrace.csv: line 2: 'x' is not a number" <<<"$LAST_ERR"

# ---- .npy headers: numpy's dict, nothing else ----
npyh() { # FILE HEADER-DICT: a float32 [2] body after it
  python3 - "$@" <<'PY'
import struct, sys
path, hdr = sys.argv[1:3]
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<2f", 1, 2))
PY
}
x=(--input "x=$tmp/h.npy" --output "$tmp/o.npy")
npyh "$tmp/h.npy" "{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }"
expect 2 "fortran_order 'no'" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
check "is a malformed header, not Fortran order" -- grep -q "malformed header: 'fortran_order' must be True or False" <<<"$LAST_ERR"
npyh "$tmp/h.npy" "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"
expect 2 "fortran_order True" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
check "says Fortran order" -- grep -q "Fortran-order arrays are not supported" <<<"$LAST_ERR"
npyh "$tmp/h.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }"
expect 2 "an extra header key" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
check "names the key" -- grep -q "unexpected key 'extra'" <<<"$LAST_ERR"
npyh "$tmp/h.npy" "{'descr': '<i4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
expect 2 "descr twice" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
check "says twice" -- grep -q "key 'descr' given twice" <<<"$LAST_ERR"
npyh "$tmp/h.npy" "{'descr': '<f4', 'shape': (2,), }"
expect 2 "no fortran_order" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
npyh "$tmp/h.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }"
expect 2 "a shape that is no tuple" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
npyh "$tmp/h.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk"
expect 2 "text after the dict" -- "$tl" run quant --scheme mxfp8 "${x[@]}"
check "no output on any refusal" -- test ! -e "$tmp/o.npy"
npyh "$tmp/h.npy" "{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"<f4\"}"
expect 2 "numpy's keys in another order, double quotes, no trailing comma: read (then too short for quant)" -- \
  "$tl" run quant --scheme mxfp8 "${x[@]}"
check "the header read; the shape was refused" -- grep -vq "header" <<<"$LAST_ERR"
# ---- configs: models says what sim moe models; alias keys that disagree are refused ----
q=$src/tests/data/configs/qwen1.5-moe-a2.7b.json
expect 0 "models qwen1.5-moe" -- "$tl" models "$q" --format json
check "models: E 60 + 4 shared of width 1408 (one of 5632), as sim moe says" -- python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
assert (r["experts"], r["top_k"], r["expert_width"], r["shared"], r["shared_width"]) == (60, 4, 1408, 4, 5632), r
assert r["ffn"] == "E 60 + 4 shared, top-4, width 1408", r["ffn"]
assert r["quant_method"] is None and r["source"] is None' <<<"$LAST_OUT"
ffn=$(python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ffn"])' <<<"$LAST_OUT")
expect 0 "sim moe qwen1.5-moe" -- "$tl" sim moe --model "$q" --hw h100 --tokens 4 --format csv
check "sim moe's header carries the same ffn line" -- grep -qF "hidden 2048, $ffn / tp 1" <<<"$LAST_ERR"
expect 0 "models mistral-7b (dense)" -- "$tl" models mistral-7b --format csv
check "a dense model: one expert every token uses" -- grep -q '^mistral-7b,4096,1,1,14336,0,' <<<"$LAST_OUT"
conf() { printf '{"hidden_size": 256, "num_hidden_layers": 2, "moe_intermediate_size": 128, %s}\n' "$1" >"$tmp/c.json"; }
conf '"n_routed_experts": 256, "num_experts": 128, "num_experts_per_tok": 2'
expect 2 "n_routed_experts 256 with num_experts 128" -- "$tl" models "$tmp/c.json"
check "names both keys and values" -- grep -q "'n_routed_experts' = 256 and 'num_experts' = 128" <<<"$LAST_ERR"
expect 2 "sim moe refuses it too" -- "$tl" sim moe --model "$tmp/c.json" --hw h100 --tokens 4
conf '"n_routed_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 4'
expect 2 "num_experts_per_tok 2 with experts_per_token 4" -- "$tl" models "$tmp/c.json"
check "names both keys and values" -- grep -q "'num_experts_per_tok' = 2 and 'experts_per_token' = 4" <<<"$LAST_ERR"
conf '"n_routed_experts": 8, "num_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 2'
expect 0 "equal values under two names (as gpt-oss writes them)" -- "$tl" models "$tmp/c.json" --format csv
check "read as E 8, top-2" -- grep -q '^c,256,8,2,128,' <<<"$LAST_OUT"
conf '"n_routed_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 128, "shared_intermediate_size": 256'
expect 2 "two shared widths" -- "$tl" models "$tmp/c.json"
# not_modelled is whole in CSV and JSON, however many keys: 80 keys of 30 characters
python3 -c '
import json, sys
d = {"hidden_size": 256, "num_hidden_layers": 2, "intermediate_size": 512}
d.update({"unused_key_number_%012d" % i: i for i in range(80)})
json.dump(d, open(sys.argv[1], "w"))' "$tmp/many.json"
expect 0 "models --format json with 80 unused keys" -- "$tl" models "$tmp/many.json" --format json
check "not_modelled names all 80, nothing cut" -- python3 -c '
import json, sys
names = json.load(sys.stdin)[0]["not_modelled"].split(", ")
assert len(names) == 80 and names[-1] == "unused_key_number_000000000079", names[-3:]
assert "..." not in ",".join(names)' <<<"$LAST_OUT"
expect 0 "models --format csv with 80 unused keys" -- "$tl" models "$tmp/many.json" --format csv
check "the CSV cell holds all 80 too" -- grep -q "unused_key_number_000000000079" <<<"$LAST_OUT"
expect 0 "models table" -- "$tl" models "$tmp/many.json"
check "the table counts them" -- grep -q " 80 keys " <<<"$LAST_OUT"
finish
