#!/usr/bin/env bash
# The op table from the command line: `tilelab ops` lists every op with its dtypes and targets;
# `tilelab run OP` and `check OP --input` take the user's .npy tensors (written here by python3's
# struct module, as numpy.save writes them), write .npy outputs atomically, and refuse malformed,
# mismatched or non-finite files with one error line and exit 2; `draw topk-split --trace` draws
# a measured H200 trace from bench/results and refuses files that are not one.
set -u
tl=$1
src=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh"

gpu_build=0
"$tl" ops --format csv | grep -q ",gpu kernels$" && gpu_build=1

# ---- tilelab ops ----
expect 0 "ops" -- "$tl" ops
check "ops names moe and its five dtypes" -- grep -q "moe  *bf16,fp8,a16w4,mxfp4,mxfp8" <<<"$LAST_OUT"
expect 0 "ops csv" -- "$tl" ops --format csv
check "ops csv header" -- test "$(head -1 <<<"$LAST_OUT")" = "op,dtypes,verbs,figures,inputs,arch,compiled,executed,run,this_build"
for arch in sm_90 gfx942 gfx950; do
  check "ops: moe has a $arch row" -- grep -q "^moe,.*,$arch," <<<"$LAST_OUT"
done
check "ops: sm_90 says where it ran" -- grep -q "^moe,.*,sm_90,.*H200" <<<"$LAST_OUT"
expect 0 "ops json" -- "$tl" ops --format json
check "ops json parses" -- python3 -c 'import json,sys; r=json.load(sys.stdin); assert r[0]["op"]=="moe"' <<<"$LAST_OUT"
expect 2 "ops --format xml" -- "$tl" ops --format xml

# ---- .npy files, written as numpy.save writes version 1.0 ----
npy() { # FILE DESCR SHAPE(python tuple) VALUES(python expr of a flat list) [FORTRAN]
  python3 - "$@" <<'EOF'
import struct, sys
path, descr, shape, values = sys.argv[1:5]
fortran = len(sys.argv) > 5
shape = eval(shape); vals = eval(values)
hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, repr(shape))
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
fmt = {"<f4": "<%df", "<i4": "<%di", ">f4": ">%df", "<f8": "<%dd"}[descr]
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack(fmt % len(vals), *vals))
EOF
}
small=(--hidden 256 --width 192 --experts 8 --topk 2 --seed 5)
T=3
npy "$tmp/x.npy" "<f4" "($T, 256)" "[((i * 37) % 101 - 50) / 25.0 for i in range($T * 256)]"
npy "$tmp/ids.npy" "<i4" "($T, 2)" "[0, 3, 7, 1, 3, 3]"
npy "$tmp/w.npy" "<f4" "($T, 2)" "[0.75, 0.25, 0.5, 0.5, 1.0, 0.0]"
ins=(--input "x=$tmp/x.npy" --input "topk_ids=$tmp/ids.npy" --input "topk_weights=$tmp/w.npy")

# ---- run: the reference on the user's tensors ----
expect 0 "run moe on .npy inputs" -- "$tl" run moe "${ins[@]}" --output "$tmp/out.npy" "${small[@]}"
check "run says what it wrote" -- grep -q "wrote $tmp/out.npy: out" <<<"$LAST_ERR"
check "run prints nothing on stdout" -- test -z "$LAST_OUT"
check "out.npy is float32 [3, 256]" -- python3 -c '
import sys, struct
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x93NUMPY\x01\x00"
n = struct.unpack("<H", b[8:10])[0]; h = b[10:10 + n].decode()
assert (10 + n) % 64 == 0 and h.endswith("\n")
d = eval(h)
assert d["descr"] == "<f4" and d["shape"] == (3, 256) and not d["fortran_order"]
v = struct.unpack("<768f", b[10 + n:])
assert len(b) == 10 + n + 768 * 4 and all(x == x for x in v) and any(x != 0 for x in v)
' "$tmp/out.npy"
expect 0 "run moe again" -- "$tl" run moe "${ins[@]}" --output "out=$tmp/out2.npy" "${small[@]}"
check "two runs write the same bytes" -- cmp -s "$tmp/out.npy" "$tmp/out2.npy"
expect 0 "run moe fp8 on the same tensors" -- "$tl" run moe "${ins[@]}" --output "$tmp/out8.npy" "${small[@]}" --dtype fp8
check "fp8 gives another answer" -- bash -c '! cmp -s "$0" "$1"' "$tmp/out.npy" "$tmp/out8.npy"
# a token whose weights are (1, 0) gets expert ids[4]'s row alone: changing the 0-weight expert changes nothing
npy "$tmp/ids_b.npy" "<i4" "($T, 2)" "[0, 3, 7, 1, 3, 5]"
expect 0 "run moe with a zero-weight expert changed" -- "$tl" run moe --input "x=$tmp/x.npy" \
  --input "topk_ids=$tmp/ids_b.npy" --input "topk_weights=$tmp/w.npy" --output "$tmp/out_b.npy" "${small[@]}"
check "the zero-weight slot does not change token 2" -- python3 -c '
import sys
a = open(sys.argv[1], "rb").read()[-1024:]; b = open(sys.argv[2], "rb").read()[-1024:]
assert a == b' "$tmp/out.npy" "$tmp/out_b.npy"

# ---- check --input: the reference against the naive loop (or the GPU) on the user's tensors ----
expect 0 "check moe --input" -- "$tl" check moe "${ins[@]}" "${small[@]}"
check "check --input passes its comparisons" -- grep -q "^all [0-9]* comparisons passed" <<<"$LAST_OUT"
check "check --input says where its routing came from" -- grep -q "routing from the --input files" <<<"$LAST_OUT"
expect 0 "check moe --input json" -- "$tl" check moe "${ins[@]}" "${small[@]}" --format json
check "check --input json parses and passes" -- python3 -c '
import json, sys; r = json.load(sys.stdin); assert r and all(x["result"] == "pass" for x in r)' <<<"$LAST_OUT"

# ---- bad files and bad calls: one line, exit 2, nothing written ----
npy "$tmp/x_short.npy" "<f4" "($T, 255)" "[0.5] * ($T * 255)"
npy "$tmp/x_nan.npy" "<f4" "($T, 256)" "[float('nan')] + [0.5] * ($T * 256 - 1)"
npy "$tmp/x_big.npy" ">f4" "($T, 256)" "[0.5] * ($T * 256)"
npy "$tmp/x_f8.npy" "<f8" "($T, 256)" "[0.5] * ($T * 256)"
npy "$tmp/x_fortran.npy" "<f4" "($T, 256)" "[0.5] * ($T * 256)" F
npy "$tmp/ids_far.npy" "<i4" "($T, 2)" "[0, 3, 8, 1, 3, 3]"
npy "$tmp/ids_f.npy" "<f4" "($T, 2)" "[0, 3, 7, 1, 3, 3]"
npy "$tmp/w_inf.npy" "<f4" "($T, 2)" "[float('inf'), 0.25, 0.5, 0.5, 1.0, 0.0]"
head -c 100 "$tmp/x.npy" >"$tmp/x_trunc.npy"
cat "$tmp/x.npy" "$tmp/w.npy" >"$tmp/x_long.npy"
echo "not a numpy file" >"$tmp/x_text.npy"
run_bad() { # DESCRIPTION X IDS W [MORE...]
  local what=$1 x=$2 ids=$3 w=$4; shift 4
  expect 2 "$what" -- "$tl" run moe --input "x=$x" --input "topk_ids=$ids" --input "topk_weights=$w" \
    --output "$tmp/bad.npy" "${small[@]}" "$@"
  check "$what: no output file" -- test ! -e "$tmp/bad.npy"
}
run_bad "x of the wrong hidden size" "$tmp/x_short.npy" "$tmp/ids.npy" "$tmp/w.npy"
check "the shape error names the file and the shape wanted" -- grep -q "x_short.npy: shape \[3, 255\], expected \[tokens, 256\]" <<<"$LAST_ERR"
run_bad "NaN in x" "$tmp/x_nan.npy" "$tmp/ids.npy" "$tmp/w.npy"
check "the NaN is named" -- grep -q "x_nan.npy: element 0 is nan" <<<"$LAST_ERR"
run_bad "big-endian x" "$tmp/x_big.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "float64 x" "$tmp/x_f8.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "Fortran-order x" "$tmp/x_fortran.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "a truncated x" "$tmp/x_trunc.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "x with trailing bytes" "$tmp/x_long.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "a text file as x" "$tmp/x_text.npy" "$tmp/ids.npy" "$tmp/w.npy"
# a header may claim any shape: 9e9 elements in a 69-byte file is refused before anything is allocated
run_bad "a header larger than its file" "$(dirname "$0")/fuzz/seeds/npy/shape-larger-than-file.npy" "$tmp/ids.npy" "$tmp/w.npy"
check "the truncation is named" -- grep -q "truncated: the shape needs 9000000000 bytes" <<<"$LAST_ERR"
run_bad "a missing x" "$tmp/none.npy" "$tmp/ids.npy" "$tmp/w.npy"
run_bad "an expert id out of range" "$tmp/x.npy" "$tmp/ids_far.npy" "$tmp/w.npy"
check "the id error says the range" -- grep -q "expert 8, outside \[0, 8)" <<<"$LAST_ERR"
run_bad "float expert ids" "$tmp/x.npy" "$tmp/ids_f.npy" "$tmp/w.npy"
run_bad "an infinite routing weight" "$tmp/x.npy" "$tmp/ids.npy" "$tmp/w_inf.npy"
run_bad "ids of the wrong top_k" "$tmp/x.npy" "$tmp/ids.npy" "$tmp/w.npy" --topk 3
expect 2 "run without --output" -- "$tl" run moe "${ins[@]}" "${small[@]}"
expect 2 "run without an input" -- "$tl" run moe --input "x=$tmp/x.npy" --output "$tmp/bad.npy" "${small[@]}"
expect 2 "run with an unknown input" -- "$tl" run moe "${ins[@]}" --input "w1=$tmp/x.npy" --output "$tmp/bad.npy"
expect 2 "run with an input given twice" -- "$tl" run moe "${ins[@]}" --input "x=$tmp/x.npy" --output "$tmp/bad.npy"
expect 2 "run with an input without a name" -- "$tl" run moe --input "$tmp/x.npy" --output "$tmp/bad.npy"
expect 2 "run with an unknown output" -- "$tl" run moe "${ins[@]}" --output "act=$tmp/bad.npy" "${small[@]}"
check "no output was written" -- test ! -e "$tmp/bad.npy"
expect 2 "run --device tpu" -- "$tl" run moe "${ins[@]}" --output "$tmp/bad.npy" --device tpu
expect 2 "run an unknown op" -- "$tl" run nope
expect 2 "run without an op" -- "$tl" run
expect 2 "check with --output" -- "$tl" check moe "${ins[@]}" --output "$tmp/bad.npy" "${small[@]}"
expect 2 "check --input alone" -- "$tl" check moe --input "x=$tmp/x.npy" "${small[@]}"
expect 1 "run into a folder that does not exist" -- "$tl" run moe "${ins[@]}" --output "$tmp/no/such/out.npy" "${small[@]}"
if [ $gpu_build -eq 0 ]; then
  expect 1 "run --device gpu without a GPU" -- "$tl" run moe "${ins[@]}" --output "$tmp/bad.npy" --device gpu "${small[@]}"
  check "it says why" -- grep -q "without a GPU" <<<"$LAST_ERR"
fi
if mkdir "$tmp/full" && mount -t tmpfs -o size=16k tmpfs "$tmp/full" 2>/dev/null; then
  head -c 65536 /dev/zero >"$tmp/full/fill" 2>/dev/null
  expect 1 "run onto a full disk" -- "$tl" run moe "${ins[@]}" --output "$tmp/full/o.npy" "${small[@]}"
  check "the full disk is named, nothing is left" -- bash -c 'grep -q "o.npy: cannot write the .npy file: No space left on device" <<<"$0" && ! compgen -G "$1/o.npy*" >/dev/null' "$LAST_ERR" "$tmp/full"
  umount "$tmp/full"
else
  echo "note: mount -t tmpfs is not allowed here: the full-disk case of run did not run"
fi
# ---- topk: .npy scores and lengths, exact int32 outputs ----
npy "$tmp/s.npy" "<f4" "(2, 8)" "[1.0, float('nan'), 3.0, float('-inf'), 3.0, -0.0, 0.0, float('inf'), 5, 4, 3, 2, 1, 0, -1, -2]"
npy "$tmp/lens.npy" "<i4" "(2,)" "[8, 2]"
expect 0 "run topk on .npy scores" -- "$tl" run topk --input "scores=$tmp/s.npy" --input "lens=$tmp/lens.npy" \
  --k 5 --sorted --output "idx=$tmp/idx.npy" --output "count=$tmp/cnt.npy"
check "idx: inf, the first 3, the second 3, 1, -0 before +0; then row 2's two and -1" -- python3 -c '
import struct, sys
def load(p, n):
    b = open(p, "rb").read(); h = struct.unpack("<H", b[8:10])[0]; return list(struct.unpack("<%di" % n, b[10 + h:]))
assert load(sys.argv[1], 10) == [7, 2, 4, 0, 5, 0, 1, -1, -1, -1], load(sys.argv[1], 10)
assert load(sys.argv[2], 2) == [5, 2]' "$tmp/idx.npy" "$tmp/cnt.npy"
expect 0 "check topk --input" -- "$tl" check topk --input "scores=$tmp/s.npy" --input "lens=$tmp/lens.npy" --k 5
check "check topk --input passes" -- grep -q "^all [0-9]* comparisons passed" <<<"$LAST_OUT"
npy "$tmp/lens_bad.npy" "<i4" "(2,)" "[9, 2]"
expect 2 "a length past n" -- "$tl" run topk --input "scores=$tmp/s.npy" --input "lens=$tmp/lens_bad.npy" --k 5 --output "$tmp/bad.npy"
npy "$tmp/s_i.npy" "<i4" "(2, 8)" "[0] * 16"
expect 2 "integer scores" -- "$tl" run topk --input "scores=$tmp/s_i.npy" --k 5 --output "$tmp/bad.npy"
check "topk wrote nothing on bad input" -- test ! -e "$tmp/bad.npy"
expect 0 "draw topk-split" -- "$tl" draw topk-split --hw h200 -o "$tmp/split.svg"
check "the split picture is an SVG" -- grep -q "<svg" "$tmp/split.svg"
expect 0 "draw topk-split bf16 at a given split" -- "$tl" draw topk-split --dtype bf16 --n 65536 --batch 32 --split 8 -o "$tmp/split.png"
trace=$(ls "$src"/bench/results/h200_topk_trace_run*.csv 2>/dev/null | grep -v b32 | head -1)
if [ -n "$trace" ]; then
  expect 0 "draw topk-split --trace (a measured H200 trace)" -- "$tl" draw topk-split --trace "$trace" --n 1048576 -o "$tmp/trace.svg"
  check "the trace picture is an SVG" -- grep -q "<svg" "$tmp/trace.svg"
  expect 2 "draw topk-split --trace: no such case" -- "$tl" draw topk-split --trace "$trace" --n 12345 -o "$tmp/bad.png"
  expect 2 "draw topk-split --trace: no such row" -- "$tl" draw topk-split --trace "$trace" --row 7 -o "$tmp/bad.png"
fi
head -1 "$trace" >"$tmp/t.csv" 2>/dev/null; echo "f32,1,4096,512,1,0,0,3,2,1,2,3,4,5,x,7,8,9,10,11,12,here" >>"$tmp/t.csv"
expect 2 "draw topk-split --trace: a malformed number" -- "$tl" draw topk-split --trace "$tmp/t.csv" -o "$tmp/bad.png"
echo "a,b,c" >"$tmp/t2.csv"
expect 2 "draw topk-split --trace: not a trace" -- "$tl" draw topk-split --trace "$tmp/t2.csv" -o "$tmp/bad.png"
expect 2 "bench topk --trace without a name" -- "$tl" bench topk --trace ""
expect 2 "check topk --trace (only bench traces)" -- "$tl" check topk --n 4096 --batch 1 --k 5 --trace "$tmp/x.csv"
expect 2 "draw topk-split --split 0" -- "$tl" draw topk-split --split 0 -o "$tmp/bad.png"
expect 2 "draw topk-split without -o" -- "$tl" draw topk-split
check "no picture on bad input" -- test ! -e "$tmp/bad.png"
check "no temporary file is left" -- bash -c '! compgen -G "$0/*.tmp.*" >/dev/null' "$tmp"
# ---- decode: .npy caches, block tables, top-k lists; outputs O and LSE ----
npy16() { # FILE DESCR('<u2'|'|u1'|'<i4'|'<f4') SHAPE VALUES: like npy, with uint16 and uint8 too
  python3 - "$@" <<'EOF'
import struct, sys
path, descr, shape, values = sys.argv[1:5]
shape = eval(shape); vals = eval(values)
hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(shape))
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
fmt = {"<u2": "<%dH", "|u1": "<%dB", "<i4": "<%di", "<f4": "<%df"}[descr]
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack(fmt % len(vals), *vals))
EOF
}
# paged: 2 requests of 5 and 20 positions, 2 KV heads x gqa 1, 3 pages; bf16 values near 1/64..1
npy16 "$tmp/d_lens.npy" "<i4" "(2,)" "[5, 20]"
npy16 "$tmp/d_q.npy" "<u2" "(2, 2, 128)" "[0x3C00 + (i * 37) % 0x300 for i in range(512)]"
npy16 "$tmp/d_k.npy" "<u2" "(3, 16, 2, 128)" "[0x3C00 + (i * 53) % 0x300 for i in range(12288)]"
npy16 "$tmp/d_v.npy" "<u2" "(3, 16, 2, 128)" "[0xBC00 + (i * 29) % 0x300 for i in range(12288)]"
npy16 "$tmp/d_t.npy" "<i4" "(2, 2)" "[2, -1, 0, 1]"
dins=(--input "lens=$tmp/d_lens.npy" --input "q=$tmp/d_q.npy" --input "k=$tmp/d_k.npy" --input "v=$tmp/d_v.npy")
expect 0 "run decode (paged, .npy cache and block table)" -- "$tl" run decode "${dins[@]}" --input "block_table=$tmp/d_t.npy" \
  --output "o=$tmp/d_o.npy" --output "lse=$tmp/d_lse.npy"
check "decode wrote O [2][2][128] and LSE [2][2], finite" -- python3 -c '
import struct, sys, math
def load(p):
    b = open(p, "rb").read(); h = struct.unpack("<H", b[8:10])[0]; d = b[10 + h:]; return b[10:10 + h].decode(), struct.unpack("<%df" % (len(d) // 4), d)
ho, o = load(sys.argv[1]); hl, l = load(sys.argv[2])
assert "(2, 2, 128)" in ho and "(2, 2)" in hl, (ho, hl)
assert len(o) == 512 and all(math.isfinite(x) for x in o + l), l' "$tmp/d_o.npy" "$tmp/d_lse.npy"
expect 0 "check decode --input" -- "$tl" check decode "${dins[@]}" --input "block_table=$tmp/d_t.npy"
check "check decode --input passes" -- grep -q "^all [0-9]* comparisons passed" <<<"$LAST_OUT"
npy16 "$tmp/d_t_bad.npy" "<i4" "(2, 2)" "[2, -1, 0, 3]"
expect 2 "decode: a block-table page past the pools" -- "$tl" run decode "${dins[@]}" --input "block_table=$tmp/d_t_bad.npy" --output "o=$tmp/bad.npy"
check "the bad page is named" -- grep -q "block_table\[1\]\[1\] = 3" <<<"$LAST_ERR"
expect 2 "decode: paged without a block table" -- "$tl" run decode "${dins[@]}" --output "o=$tmp/bad.npy"
npy16 "$tmp/d_q64.npy" "<u2" "(2, 2, 64)" "[0x3C00] * 256"
expect 2 "decode: q of head dim 64" -- "$tl" run decode --input "lens=$tmp/d_lens.npy" --input "q=$tmp/d_q64.npy" \
  --input "k=$tmp/d_k.npy" --input "v=$tmp/d_v.npy" --input "block_table=$tmp/d_t.npy" --output "o=$tmp/bad.npy"
npy16 "$tmp/d_kf.npy" "<f4" "(3, 16, 2, 128)" "[0.5] * 12288"
expect 2 "decode: a float32 cache" -- "$tl" run decode --input "lens=$tmp/d_lens.npy" --input "q=$tmp/d_q.npy" \
  --input "k=$tmp/d_kf.npy" --input "v=$tmp/d_kf.npy" --input "block_table=$tmp/d_t.npy" --output "o=$tmp/bad.npy"
npy16 "$tmp/d_k8.npy" "|u1" "(3, 16, 2, 128)" "[(i * 7) % 120 for i in range(12288)]"
expect 2 "decode: an fp8 cache without its scales" -- "$tl" run decode --input "lens=$tmp/d_lens.npy" --input "q=$tmp/d_q.npy" \
  --input "k=$tmp/d_k8.npy" --input "v=$tmp/d_k8.npy" --input "block_table=$tmp/d_t.npy" --output "o=$tmp/bad.npy"
npy16 "$tmp/d_lens_bad.npy" "<i4" "(2,)" "[5, 40]"
expect 2 "decode: a length past the block table" -- "$tl" run decode --input "lens=$tmp/d_lens_bad.npy" --input "q=$tmp/d_q.npy" \
  --input "k=$tmp/d_k.npy" --input "v=$tmp/d_v.npy" --input "block_table=$tmp/d_t.npy" --output "o=$tmp/bad.npy"
head -c 60 "$tmp/d_k.npy" >"$tmp/d_trunc.npy"
expect 2 "decode: a truncated .npy" -- "$tl" run decode --input "lens=$tmp/d_lens.npy" --input "q=$tmp/d_q.npy" \
  --input "k=$tmp/d_trunc.npy" --input "v=$tmp/d_v.npy" --input "block_table=$tmp/d_t.npy" --output "o=$tmp/bad.npy"
# dual-scope: 1 request of 40 positions, T = 1, H = 16, top-4 with a window position, a repeat and -1
npy16 "$tmp/m_lens.npy" "<i4" "(1,)" "[40]"
npy16 "$tmp/m_q.npy" "<u2" "(1, 1, 16, 576)" "[0x3C00 + (i * 41) % 0x300 for i in range(9216)]"
npy16 "$tmp/m_kv.npy" "|u1" "(1, 40, 576)" "[(i * 13) % 110 + (128 if i % 3 else 0) for i in range(23040)]"
npy16 "$tmp/m_ks.npy" "<f4" "(1, 40)" "[0.01 * (1 + i % 5) for i in range(40)]"
npy16 "$tmp/m_top.npy" "<i4" "(1, 1, 4)" "[3, 39, 3, -1]"
mins=(--input "lens=$tmp/m_lens.npy" --input "q=$tmp/m_q.npy" --input "k=$tmp/m_kv.npy" --input "kscale=$tmp/m_ks.npy")
expect 0 "check decode dual-scope --input" -- "$tl" check decode --kind dual-scope --window 8 "${mins[@]}" --input "topk=$tmp/m_top.npy"
check "check decode dual-scope --input passes" -- grep -q "^all [0-9]* comparisons passed" <<<"$LAST_OUT"
npy16 "$tmp/m_top_bad.npy" "<i4" "(1, 1, 4)" "[3, 40, 3, -1]"
expect 2 "decode: a top-k index past the request" -- "$tl" run decode --kind dual-scope "${mins[@]}" --input "topk=$tmp/m_top_bad.npy" --output "o=$tmp/bad.npy"
check "the bad index is named" -- grep -q "topk\[0\]\[0\]\[1\] = 40" <<<"$LAST_ERR"
npy16 "$tmp/m_ks_nan.npy" "<f4" "(1, 40)" "[float('nan')] * 40"
expect 2 "decode: a NaN scale" -- "$tl" run decode --kind dual-scope --input "lens=$tmp/m_lens.npy" --input "q=$tmp/m_q.npy" \
  --input "k=$tmp/m_kv.npy" --input "kscale=$tmp/m_ks_nan.npy" --output "o=$tmp/bad.npy"
expect 2 "decode: lens missing" -- "$tl" run decode --kind dual-scope --input "q=$tmp/m_q.npy" --input "k=$tmp/m_kv.npy" --output "o=$tmp/bad.npy"
check "decode wrote nothing on bad input" -- test ! -e "$tmp/bad.npy"
# ---- quant: .npy activations (float32, rounded to bf16), uint8 codes and float32 / E8M0 scales ----
npy "$tmp/qx.npy" "<f4" "(2, 256)" "[((i * 37) % 19 - 9) / 4.0 for i in range(512)]"
expect 0 "run quant fp8 on .npy" -- "$tl" run quant --input "x=$tmp/qx.npy" --output "codes=$tmp/qc.npy" --output "scales=$tmp/qs.npy"
check "fp8: codes [2][256] uint8, scales [2][2] = amax 2.25 / 448, 2.25 -> 448" -- python3 -c '
import struct, sys
def load(p):
    b = open(p, "rb").read(); h = struct.unpack("<H", b[8:10])[0]; return b[10:10 + h].decode(), b[10 + h:]
hc, c = load(sys.argv[1]); hs, s = load(sys.argv[2])
assert "|u1" in hc and "(2, 256)" in hc, hc
assert "<f4" in hs and "(2, 2)" in hs, hs
sc = struct.unpack("<4f", s)
assert all(v == struct.unpack("<f", struct.pack("<f", 2.25 / 448))[0] for v in sc), sc
vals = [((i * 37) % 19 - 9) / 4.0 for i in range(512)]
assert all(c[i] == (0x7E if vals[i] == 2.25 else 0xFE) for i in range(512) if abs(vals[i]) == 2.25)' "$tmp/qc.npy" "$tmp/qs.npy"
expect 0 "check quant --input (mxfp4, round-up)" -- "$tl" check quant --input "x=$tmp/qx.npy" --scheme mxfp4 --rule up
check "check quant --input passes" -- grep -q "^all [0-9]* comparisons passed" <<<"$LAST_OUT"
expect 0 "run quant mxfp4" -- "$tl" run quant --input "x=$tmp/qx.npy" --scheme mxfp4 --output "codes=$tmp/q4.npy" --output "scales=$tmp/q4s.npy"
check "mxfp4: codes [2][128] (two a byte), scales [2][8] uint8" -- bash -c 'grep -aq "(2, 128)" "$0" && grep -aq "(2, 8)" "$1"' "$tmp/q4.npy" "$tmp/q4s.npy"
npy "$tmp/qids.npy" "<i4" "(2, 8)" "list(range(16))"
npy "$tmp/qw.npy" "<f4" "(2, 8)" "[0.125] * 16"
expect 0 "run quant dispatch" -- "$tl" run quant --scheme dispatch --input "x=$tmp/qx.npy" --input "ids=$tmp/qids.npy" \
  --input "weights=$tmp/qw.npy" --output "records=$tmp/qr.npy"
check "dispatch: 2 records of 256 + 8 + 32 + 32 + 8 = 336 bytes" -- grep -aq "(2, 336)" "$tmp/qr.npy"
expect 0 "check quant dispatch --input" -- "$tl" check quant --scheme dispatch --input "x=$tmp/qx.npy" --input "ids=$tmp/qids.npy" --input "weights=$tmp/qw.npy"
npy "$tmp/qx_k.npy" "<f4" "(2, 100)" "[1.0] * 200"
expect 2 "quant: K not a multiple of 128" -- "$tl" run quant --input "x=$tmp/qx_k.npy" --output "$tmp/bad.npy"
npy "$tmp/qx_i.npy" "<i4" "(2, 128)" "[1] * 256"
expect 2 "quant: integer activations" -- "$tl" run quant --input "x=$tmp/qx_i.npy" --output "$tmp/bad.npy"
printf '\x93NUMPY\x01\x00\x10\x00{"descr": bad}\n' >"$tmp/qx_bad.npy"
expect 2 "quant: a malformed .npy" -- "$tl" run quant --input "x=$tmp/qx_bad.npy" --output "$tmp/bad.npy"
expect 2 "quant dispatch without ids" -- "$tl" run quant --scheme dispatch --input "x=$tmp/qx.npy" --output "$tmp/bad.npy"
npy "$tmp/qids_bad.npy" "<i4" "(2, 4)" "list(range(8))"
expect 2 "quant dispatch: ids of the wrong top-k" -- "$tl" run quant --scheme dispatch --input "x=$tmp/qx.npy" \
  --input "ids=$tmp/qids_bad.npy" --input "weights=$tmp/qw.npy" --output "$tmp/bad.npy"
npy "$tmp/qw_nan.npy" "<f4" "(2, 8)" "[float('nan')] * 16"
expect 2 "quant dispatch: NaN weights" -- "$tl" run quant --scheme dispatch --input "x=$tmp/qx.npy" \
  --input "ids=$tmp/qids.npy" --input "weights=$tmp/qw_nan.npy" --output "$tmp/bad.npy"
expect 2 "quant: ids for a scheme without routing" -- "$tl" run quant --input "x=$tmp/qx.npy" --input "ids=$tmp/qids.npy" --output "$tmp/bad.npy"
expect 2 "quant: an unknown scheme" -- "$tl" check quant --scheme fp7
expect 2 "quant: negative rows" -- "$tl" sim quant --rows -4
expect 2 "quant: absurd shapes" -- "$tl" sim quant --rows 16777216 --k 131072
expect 2 "quant: --rule on fp8" -- "$tl" sim quant --rule up
expect 2 "quant: --hadamard on mxfp8" -- "$tl" sim quant --scheme mxfp8 --hadamard
check "quant wrote nothing on bad input" -- test ! -e "$tmp/bad.npy"
expect 0 "sim dispatch" -- "$tl" sim dispatch --model glm-5 --ep 8 --tokens 1024 --format csv
check "sim dispatch: 12,288 bytes of BF16 and 6,408 of FP8 a token" -- bash -c 'grep -q "^glm-5,6144,8,8,1024,bf16,12288,0,0,12288," <<<"$0" && grep -q "^glm-5,6144,8,8,1024,fp8 1x128,6144,192,72,6408," <<<"$0"' "$LAST_OUT"
expect 2 "sim dispatch --ep 1" -- "$tl" sim dispatch --ep 1
expect 2 "sim dispatch --tokens 0" -- "$tl" sim dispatch --tokens 0
expect 2 "sim dispatch: an unknown model" -- "$tl" sim dispatch --model glm-9
expect 0 "draw dispatch-bytes" -- "$tl" draw dispatch-bytes -o "$tmp/db.svg"
check "the dispatch picture is an SVG" -- grep -q "<svg" "$tmp/db.svg"
expect 2 "draw dispatch-bytes without -o" -- "$tl" draw dispatch-bytes
expect 0 "sim quant csv onto the roofline" -- "$tl" sim quant --hw h200 --rows 1,4096,16384 --k 7168 --format csv
echo "$LAST_OUT" >"$tmp/qsim.csv"
expect 0 "draw roofline --points (quant's sim CSV)" -- "$tl" draw roofline --hw h200 --points "$tmp/qsim.csv" -o "$tmp/qroof.svg"
expect 0 "run --help" -- "$tl" run moe --help
check "run's help names its inputs" -- grep -q "topk_weights=FILE.npy" <<<"$LAST_OUT"
finish
