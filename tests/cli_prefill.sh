#!/usr/bin/env bash
# `check|sim|run prefill` from the command line: a small check passes (the kernel against the
# reference where this build has a GPU and the machine one; the reference against the naive loop
# otherwise, which the output says), csv/json are only CSV/JSON, `run prefill` writes O and LSE
# .npy files from the user's tensors, and bad input is refused with one error line and exit 2.
set -u
tl=$1
. "$(dirname "$0")/lib.sh"

gpu=0
"$tl" ops --format csv | grep -q "^prefill,.*gpu kernels$" && gpu=1
expect 0 "check prefill fp8, GQA, two lengths (300: a partial tile)" -- \
  "$tl" check prefill --shape 4x2x128 --seq 64,300 --dtype fp8 --rotate hadamard --dist outliers --seed 5
if [ $gpu -eq 1 ] && grep -q "GPU part skipped" <<<"$LAST_OUT$LAST_ERR"; then gpu=0; fi
if [ $gpu -eq 1 ]; then
  check "the kernel was compared" -- grep -q "pass" <<<"$LAST_OUT"
else
  echo "SKIPPED: no GPU here: the reference against the naive loop only"
  check "the check says it ran the naive loop" -- grep -q "reference vs naive" <<<"$LAST_OUT"
fi
expect 0 "check prefill bf16 MLA 192/128 csv" -- "$tl" check prefill --shape 2x2x192 --seq 40 --format csv --seed 1
check "csv only" -- python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin)); assert len(r) >= 2 and all(len(x)==len(r[0]) for x in r)' <<<"$LAST_OUT"
expect 0 "sim prefill json" -- "$tl" sim prefill --shape deepseek-v2-lite --seq 1024,4097 --dtype fp8 --format json
check "json only, two rows" -- python3 -c 'import json,sys; r=json.load(sys.stdin); assert len(r)==2' <<<"$LAST_OUT"

# run prefill on the user's float32 tensors: seq 5, 2 heads on 1 KV head, dim 128
python3 - "$tmp" <<'EOF'
import struct, sys, random
random.seed(3)
def npy(path, shape):
    n = 1
    for s in shape: n *= s
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (repr(shape),)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % n, *[random.gauss(0, 1) for _ in range(n)]))
npy(sys.argv[1] + "/q.npy", (5, 2, 128)); npy(sys.argv[1] + "/k.npy", (5, 1, 128)); npy(sys.argv[1] + "/v.npy", (5, 1, 128))
npy(sys.argv[1] + "/k_bad.npy", (6, 1, 128))
EOF
expect 0 "run prefill on .npy inputs" -- "$tl" run prefill --shape 2x1x128 --input "q=$tmp/q.npy" --input "k=$tmp/k.npy" \
  --input "v=$tmp/v.npy" --output "o=$tmp/o.npy" --output "lse=$tmp/lse.npy" --device cpu
check "run wrote O [5][2][128]" -- grep -q "(5, 2, 128)" <(head -c 128 "$tmp/o.npy")
check "run wrote LSE [2][5]" -- grep -q "(2, 5)" <(head -c 128 "$tmp/lse.npy")
expect 0 "check prefill --input" -- "$tl" check prefill --shape 2x1x128 --input "q=$tmp/q.npy" --input "k=$tmp/k.npy" \
  --input "v=$tmp/v.npy"

# bad input: one error line, exit 2
expect 2 "k of another length" -- "$tl" check prefill --shape 2x1x128 --input "q=$tmp/q.npy" --input "k=$tmp/k_bad.npy" \
  --input "v=$tmp/v.npy"
expect 2 "q for another shape" -- "$tl" check prefill --shape mistral-7b --input "q=$tmp/q.npy" --input "k=$tmp/k.npy" \
  --input "v=$tmp/v.npy"
expect 2 "--shape llama" -- "$tl" check prefill --shape llama
expect 2 "--shape 6x4x128 (heads not a multiple of KV heads)" -- "$tl" sim prefill --shape 6x4x128
expect 2 "--seq 0" -- "$tl" check prefill --seq 0
expect 2 "--dtype fp4" -- "$tl" bench prefill --dtype fp4
expect 2 "--rotate spin" -- "$tl" check prefill --rotate spin
expect 2 "--tile outside bench" -- "$tl" check prefill --tile 128x64x4
expect 2 "--tile malformed" -- "$tl" bench prefill --tile 128x64
finish
