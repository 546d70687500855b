#!/usr/bin/env bash
# The contracts say what the code does (issue 37, part B): quant's Hadamard order and the dispatch
# record's source rank (run quant --src-rank), run quant's usage naming records=, decode's O shape
# as run writes it, prefill's reference-versus-kernel split, and the indexer's caller windows
# (empty ones too) reachable from run (--input windows=W.npy).
#   bash tests/cli_contracts.sh <tilelab> <source-dir>
set -u
tl=$1
src=${2:-.}
. "$src/tests/lib.sh"

npy() { # FILE DESCR SHAPE(python tuple) VALUES(python expr of a flat list)
  python3 - "$@" <<'PY'
import struct, sys
path, descr, shape, values = sys.argv[1:5]
shape = eval(shape); vals = eval(values)
hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(shape))
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
fmt = {"<f4": "f", "<i4": "i", "|u1": "B", "<u2": "H"}[descr]
open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<%d%s" % (len(vals), fmt), *vals))
PY
}
# npy_info FILE: "descr shape" of a .npy (numpy's own header, read with Python's literal reader)
npy_info() { python3 -c '
import ast, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<H", b[8:10])[0]; d = ast.literal_eval(b[10:10 + n].decode())
print(d["descr"], d["shape"])' "$1"; }

# ---- quant: the dispatch record's source rank comes from --src-rank; usage names records= ----
npy "$tmp/x.npy" "<f4" "(2, 128)" "[((i * 37) % 101 - 50) / 25.0 for i in range(256)]"
npy "$tmp/ids.npy" "<i4" "(2, 2)" "[0, 3, 7, 1]"
npy "$tmp/w.npy" "<f4" "(2, 2)" "[0.75, 0.25, 0.5, 0.5]"
disp=(run quant --scheme dispatch --topk 2 --input "x=$tmp/x.npy" --input "ids=$tmp/ids.npy" --input "weights=$tmp/w.npy")
# source(FILE): "row,rank row,rank" of the records (codes K, scales K/32, ids 4k, weights 4k, then row, rank)
source_of() { python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<H", b[8:10])[0]; d = b[10 + n:]
K, k, stride = 128, 2, len(d) // 2
at = K + K // 32 + 8 * k
print(" ".join("%d,%d" % struct.unpack("<2i", d[r * stride + at:r * stride + at + 8]) for r in range(2)))' "$1"; }
expect 0 "run quant dispatch --src-rank 7" -- "$tl" "${disp[@]}" --src-rank 7 --output "records=$tmp/r7.npy"
check "records are uint8 [2][160]" -- test "$(npy_info "$tmp/r7.npy")" = "|u1 (2, 160)"
check "each record names its row and rank 7" -- test "$(source_of "$tmp/r7.npy")" = "0,7 1,7"
expect 0 "run quant dispatch, no --src-rank" -- "$tl" "${disp[@]}" --output "records=$tmp/r0.npy"
check "the default source rank of run is 0" -- test "$(source_of "$tmp/r0.npy")" = "0,0 1,0"
expect 2 "--src-rank on a scheme without records" -- "$tl" run quant --input "x=$tmp/x.npy" --src-rank 2 --output "codes=$tmp/c.npy"
expect 2 "--src-rank -1" -- "$tl" "${disp[@]}" --src-rank -1 --output "records=$tmp/rb.npy"
expect 2 "--src-rank 2^31" -- "$tl" "${disp[@]}" --src-rank 2147483648 --output "records=$tmp/rb.npy"
expect 0 "check quant dispatch with --src-rank (CPU: reference, naive and host kernel agree)" -- \
  "$tl" check quant --scheme dispatch --rows 3 --k 256 --topk 2 --src-rank 5 --seed 1
expect 0 "run quant --help" -- "$tl" run quant --help
check "the usage names records= for dispatch" -- grep -q "output records=FILE.npy" <<<"$LAST_OUT"
check "the usage names --src-rank" -- grep -q -- "--src-rank R" <<<"$LAST_OUT"
check "contract/quant.h states the butterfly order" -- grep -q "strides h = 1, 2, 4, 8, 16, 32" "$src/contract/quant.h"
check "contract/quant.h says where the source rank comes from" -- grep -q "run quant --src-rank R" "$src/contract/quant.h"

# ---- decode: O and LSE as run writes them, and the contract says so ----
B=2 T=2 H=16 L=40
npy "$tmp/lens.npy" "<i4" "($B,)" "[40, 17]"
npy "$tmp/q.npy" "<u2" "($B, $T, $H, 576)" "[0x3c00 + (i % 7) * 0x10 for i in range($B * $T * $H * 576)]"
npy "$tmp/kv.npy" "<u2" "($B, $L, 576)" "[0x3c00 - (i % 5) * 0x20 for i in range($B * $L * 576)]"
npy "$tmp/topk.npy" "<i4" "($B, $T, 4)" "[0, 3, 9, -1, 1, 2, 5, 7, 0, 4, 11, 16, 2, 6, -1, -1]"
expect 0 "run decode dual-scope" -- "$tl" run decode --kind dual-scope --mtp $T --window 8 --input "lens=$tmp/lens.npy" \
  --input "q=$tmp/q.npy" --input "k=$tmp/kv.npy" --input "topk=$tmp/topk.npy" --output "o=$tmp/o.npy" --output "lse=$tmp/lse.npy"
check "O is float32 [B][T][H][dv]" -- test "$(npy_info "$tmp/o.npy")" = "<f4 ($B, $T, $H, 512)"
check "LSE is float32 [B][T][H]" -- test "$(npy_info "$tmp/lse.npy")" = "<f4 ($B, $T, $H)"
check "contract/decode.h names that shape and what a row is" -- \
  grep -q "O \[B\]\[T\]\[H\]\[dv\] and LSE \[B\]\[T\]\[H\]" "$src/contract/decode.h"
check "and row b x T + t" -- grep -q "row b x T + t" "$src/contract/decode.h"

# ---- prefill: run on the CPU returns the reference's float32 O; the contract says whose it is ----
S=5 PH=2 D=16
npy "$tmp/pq.npy" "<f4" "($S, $PH, $D)" "[((i * 13) % 17 - 8) / 8.0 for i in range($S * $PH * $D)]"
npy "$tmp/pk.npy" "<f4" "($S, $PH, $D)" "[((i * 7) % 11 - 5) / 5.0 for i in range($S * $PH * $D)]"
npy "$tmp/pv.npy" "<f4" "($S, $PH, $D)" "[((i * 5) % 9 - 4) / 4.0 for i in range($S * $PH * $D)]"
expect 0 "run prefill on the CPU" -- "$tl" run prefill --shape ${PH}x$D --input "q=$tmp/pq.npy" --input "k=$tmp/pk.npy" \
  --input "v=$tmp/pv.npy" --output "o=$tmp/po.npy" --output "lse=$tmp/plse.npy"
check "O is float32 [seq][H][dv]" -- test "$(npy_info "$tmp/po.npy")" = "<f4 ($S, $PH, $D)"
check "contract/prefill.h: O is bf16 from the kernel, float32 from the reference" -- \
  grep -q "O \[seq\]\[H\]\[dv\]: bf16 from the kernel, float32 from the reference" "$src/contract/prefill.h"
check "contract/prefill.h: the reference keeps P exact, the tolerance covers the kernel's roundings" -- \
  bash -c 'grep -q "P never rounded" "$1" && grep -q "The tolerance covers the gap (ops/prefill.c tolerances())" "$1"' _ "$src/contract/prefill.h"
check "contract/prefill.h no longer says the function's O is stored bf16" -- bash -c '! grep -q "stored bf16, RNE)" "$1"' _ "$src/contract/prefill.h"

# ---- indexer: the caller's windows, an empty one among them ----
R=3 KV=6 IH=16
npy "$tmp/iq.npy" "|u1" "($R, $IH, 128)" "[0x38 if i % 3 == 0 else (0x30 if i % 3 == 1 else 0xb0) for i in range($R * $IH * 128)]"
npy "$tmp/ik.npy" "|u1" "($KV, 128)" "[0x38 if i % 5 else 0x40 for i in range($KV * 128)]"
npy "$tmp/iks.npy" "<f4" "($KV,)" "[0.5, 1.0, 1.5, 2.0, 0.25, 0.75]"
npy "$tmp/iw.npy" "<f4" "($R, $IH)" "[1.0 / (1 + i % 4) for i in range($R * $IH)]"
idx=(run indexer --input "q=$tmp/iq.npy" --input "k=$tmp/ik.npy" --input "kscale=$tmp/iks.npy" --input "w=$tmp/iw.npy")
npy "$tmp/win.npy" "<i4" "($R, 2)" "[2, 2, 1, 4, 0, 6]"
expect 0 "run indexer --input windows (row 0 empty)" -- "$tl" "${idx[@]}" --input "windows=$tmp/win.npy" --output "logits=$tmp/l.npy"
# finite(FILE): each row's logits as '.' (-inf) and 'x' (finite)
finite_map() { python3 -c '
import math, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<H", b[8:10])[0]; d = b[10 + n:]
v = struct.unpack("<%df" % (len(d) // 4), d); kv = int(sys.argv[2])
print(" ".join("".join("." if v[r * kv + j] == -math.inf else ("x" if math.isfinite(v[r * kv + j]) else "?") for j in range(kv)) for r in range(len(v) // kv)))' "$1" $KV; }
check "logits follow the windows: empty, [1, 4), all" -- test "$(finite_map "$tmp/l.npy")" = "...... .xxx.. xxxxxx"
check "the run says the windows are the caller's" -- grep -q "the caller's windows (--input windows)" <<<"$LAST_ERR"
npy "$tmp/causal.npy" "<i4" "($R, 2)" "[0, 4, 0, 5, 0, 6]"
expect 0 "windows equal to the causal rule" -- "$tl" "${idx[@]}" --input "windows=$tmp/causal.npy" --output "logits=$tmp/lw.npy"
expect 0 "the causal rule (prefix kv - rows)" -- "$tl" "${idx[@]}" --output "logits=$tmp/lc.npy"
check "give the same logits, bit for bit" -- cmp -s "$tmp/lw.npy" "$tmp/lc.npy"
npy "$tmp/badwin.npy" "<i4" "($R, 2)" "[0, 4, 3, 2, 0, 6]"
expect 2 "a window with start > end" -- "$tl" "${idx[@]}" --input "windows=$tmp/badwin.npy" --output "logits=$tmp/lb.npy"
npy "$tmp/farwin.npy" "<i4" "($R, 2)" "[0, 4, 0, 7, 0, 6]"
expect 2 "a window past kv" -- "$tl" "${idx[@]}" --input "windows=$tmp/farwin.npy" --output "logits=$tmp/lb.npy"
npy "$tmp/shortwin.npy" "<i4" "(2, 2)" "[0, 4, 0, 5]"
expect 2 "windows for 2 of 3 rows" -- "$tl" "${idx[@]}" --input "windows=$tmp/shortwin.npy" --output "logits=$tmp/lb.npy"
check "says the shape wanted" -- grep -q "expected \[3\]\[2\]" <<<"$LAST_ERR"
npy "$tmp/fwin.npy" "<f4" "($R, 2)" "[0, 4, 0, 5, 0, 6]"
expect 2 "float windows" -- "$tl" "${idx[@]}" --input "windows=$tmp/fwin.npy" --output "logits=$tmp/lb.npy"
expect 2 "windows and --prefix both" -- "$tl" "${idx[@]}" --input "windows=$tmp/win.npy" --prefix 1 --output "logits=$tmp/lb.npy"
check "nothing written on a refusal" -- test ! -e "$tmp/lb.npy"
expect 0 "check indexer --input with windows (CPU: reference against the naive loop)" -- \
  "$tl" check indexer --input "q=$tmp/iq.npy" --input "k=$tmp/ik.npy" --input "kscale=$tmp/iks.npy" --input "w=$tmp/iw.npy" \
  --input "windows=$tmp/win.npy" --seed 1
expect 0 "run indexer --help" -- "$tl" run indexer --help
check "the usage names --input windows" -- grep -q -- "--input windows=W.npy" <<<"$LAST_OUT"
finish
