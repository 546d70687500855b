#!/usr/bin/env bash
# Inputs that cannot hang or run without bounds: a named pipe given as any input file is refused
# at once (never waited on), an oversized JSON result is refused before it is read, a UTF-8
# byte-order mark does not break a JSON or CSV input, and work or memory that cannot fit is
# refused with its size. Every command that could hang runs under `timeout 5` (exit 124 = a hang).
set -u
tl=$1
. "$(dirname "$0")/lib.sh"
src=${2:-.}
result=$src/bench/results/2026-11-29_h200_roofline.json

# ---- a named pipe as input: refused, one error line, no wait for a writer ----
mkfifo "$tmp/fifo"
fifo_refused() { grep -q "not a regular file (a named pipe)" <<<"$LAST_ERR"; }
expect 2 "bench roofline --from FIFO" -- timeout 5 "$tl" bench roofline --from "$tmp/fifo"
check "--from FIFO says named pipe" -- fifo_refused
expect 2 "draw roofline --points FIFO" -- timeout 5 "$tl" draw roofline --points "$tmp/fifo" -o "$tmp/r.svg"
check "--points FIFO says named pipe" -- fifo_refused
expect 2 "draw timeline --trace FIFO" -- timeout 5 "$tl" draw timeline --trace "$tmp/fifo" -o "$tmp/t.svg"
check "--trace FIFO says named pipe" -- fifo_refused
expect 2 "sim moe --routing trace:FIFO" -- timeout 5 "$tl" sim moe --tokens 4 --routing "trace:$tmp/fifo"
check "trace:FIFO says named pipe" -- fifo_refused
expect 2 "run moe --input x=FIFO" -- timeout 5 "$tl" run moe --model deepseek-v2-lite --input "x=$tmp/fifo" \
  --input "topk_ids=$tmp/fifo" --input "topk_weights=$tmp/fifo" --output "$tmp/o.npy"
check "--input FIFO says named pipe" -- fifo_refused
check "no output written" -- test ! -e "$tmp/o.npy"

# ---- sizes: a JSON result over 16 MiB is refused before it is read, with both sizes ----
{ head -c $((17 << 20)) /dev/zero | tr '\0' ' '; cat "$result"; } >"$tmp/big.json"
expect 2 "--from a 17 MiB JSON" -- timeout 20 "$tl" bench roofline --from "$tmp/big.json"
check "the message gives the size and the limit" -- grep -q "is 17.0 MiB, more than the 16.0 MiB" <<<"$LAST_ERR"
expect 0 "--from the real result still reads" -- "$tl" bench roofline --from "$result" --format csv

# a .npy whose header claims 4 GiB in a file of 128 bytes: refused before the body is allocated
python3 -c '
import sys
d = b"{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (1073741824,), }"
d += b" " * (64 - 10 - len(d) % 64 - 1) + b"\n"
sys.stdout.buffer.write(b"\x93NUMPY\x01\x00" + bytes([len(d) % 256, len(d) // 256]) + d + b"\0" * 64)
' >"$tmp/claims4g.npy"
expect 2 "a .npy shorter than its shape" -- "$tl" run moe --model deepseek-v2-lite --input "x=$tmp/claims4g.npy" \
  --input "topk_ids=$tmp/claims4g.npy" --input "topk_weights=$tmp/claims4g.npy" --output "$tmp/o.npy"
check "says what the shape needs and what the file holds" -- \
  grep -q "the shape needs 4294967296 bytes of data, the file holds 64" <<<"$LAST_ERR"

# ---- a UTF-8 byte-order mark at the start is skipped, not shown as an invisible character ----
{ printf '\xef\xbb\xbf'; cat "$result"; } >"$tmp/bom.json"
expect 0 "--from a JSON with a BOM" -- "$tl" bench roofline --from "$tmp/bom.json" --format csv
printf '\xef\xbb\xbfintensity,tflops,label\n10,100,a\n' >"$tmp/bom.csv"
expect 0 "--points a CSV with a BOM (first column intensity)" -- "$tl" draw roofline --points "$tmp/bom.csv" -o "$tmp/bom.svg"

# ---- work without bounds: refused, saying how much ----
expect 2 "quantize random rotation of 2^28 values in rows of 2048" -- timeout 20 \
  "$tl" numerics quantize --scheme mxfp4 --rotate random --row 2048 --n 268435456
check "the message gives the work and the bound" -- grep -q "1.1e+12 multiply-adds, more than the 6.87e+10 (2^36)" <<<"$LAST_ERR"
expect 0 "quantize random rotation within the bound" -- \
  "$tl" numerics quantize --scheme mxfp4 --rotate random --row 64 --n 4096 --seed 1 --format csv

# 2^20 sequences x 2^20 tokens x 16 heads x 128 x 2 x 2 B = 9.0 PB of KV cache, on 288 GB of HBM
expect 2 "paged-decode KV cache larger than HBM" -- \
  "$tl" sim paged-decode --hw mi355x --gqa 1 --batch 1048576 --seq 1048576 --kv-heads 16
check "the message gives both sizes" -- grep -q "KV cache of 9.01 PB .* does not fit in the 288 GB of HBM of mi355x" <<<"$LAST_ERR"
# 141 GB H200: 2 x 32 x 65536 x 8 x 128 x 2 B = 8.6 GB fits; 64x that (550 GB) does not
expect 0 "paged-decode that fits" -- "$tl" sim paged-decode --hw h200 --gqa 4 --batch 32 --seq 65536 --kv-heads 8
expect 2 "paged-decode 550 GB on h200" -- "$tl" sim paged-decode --hw h200 --gqa 4 --batch 2048 --seq 65536 --kv-heads 8
check "names the preset's 141 GB" -- grep -q "KV cache of 550 GB .* 141 GB of HBM of h200" <<<"$LAST_ERR"

# presets and configs: the same guards in simulator/presets.c and the overlay chain
expect 2 "models FIFO" -- timeout 5 "$tl" models "$tmp/fifo"
check "models FIFO says named pipe" -- fifo_refused
expect 2 "hw show FIFO" -- timeout 5 "$tl" hw show "$tmp/fifo"
check "hw show FIFO says named pipe" -- fifo_refused
{ head -c $((17 << 20)) /dev/zero | tr '\0' ' '; cat "$src/presets/hw/h200.json"; } >"$tmp/bighw.json"
expect 2 "hw show a 17 MiB preset" -- timeout 20 "$tl" hw show "$tmp/bighw.json"
check "gives the size and the limit" -- grep -q "17.0 MiB.*16 MiB" <<<"$LAST_ERR"
{ printf '\xef\xbb\xbf'; cat "$src/presets/hw/h200.json"; } >"$tmp/bomhw.json"
expect 0 "hw show a preset with a BOM" -- "$tl" hw show "$tmp/bomhw.json"
echo '{"cus": -5}' >"$tmp/bad.json"; echo '{"launch_us": 3}' >"$tmp/good.json"
expect 2 "hw show h200,bad,good" -- "$tl" hw show "h200,$tmp/bad.json,$tmp/good.json"
check "blames the chain, not good.json alone" -- grep -q "h200,.*bad.json,.*good.json: field 'cus' = -5" <<<"$LAST_ERR"
sed 's/"cus": 132/"cus": 9223372036854775807/' "$src/presets/hw/h200.json" >"$tmp/bigcus.json"
expect 2 "cus = 2^63 - 1" -- "$tl" hw show "$tmp/bigcus.json"
check "echoed as given, not ...808" -- grep -q "'cus' = 9223372036854775807 is outside" <<<"$LAST_ERR"
finish
