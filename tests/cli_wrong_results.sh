#!/usr/bin/env bash
# Wrong results a user met (issue 37): a signalling NaN in an FP8 group (run and check quant), the
# indexer's --prefix checked against the --input files' shape, and the indexer's default launch
# being the configuration the model picks. A few seconds.
#   bash tests/cli_wrong_results.sh <tilelab> <source-dir>
set -u
tl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
. "$src/tests/lib.sh"
cd "$tmp" || exit 1

# .npy writer: npy PATH DESCR SHAPE-TUPLE STRUCT-FORMAT VALUES...
cat >npy.py <<'PY'
import struct, sys
def npy(path, descr, shape, fmt, vals):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (11 + len(h)) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%d%s" % (len(vals), fmt), *vals))
def floats(path): # the float32 values of a little-endian .npy
    d = open(path, "rb").read(); n = struct.unpack("<H", d[8:10])[0]
    b = d[10 + n:]; return struct.unpack("<%df" % (len(b) // 4), b)
PY

# ---- a signalling NaN in a 1x128 group: amax ignores it (scale 4/448, not 1/448) ----
for nan in 7F81 7FC1; do
  python3 -c "
import sys; sys.path.insert(0, '.'); from npy import npy
v = [0x3F80] * 384; v[0] = 0x4080; v[1] = 0x$nan
npy('x$nan.npy', '<u2', '(3, 128)', 'H', v)"
  for scheme in fp8 fp8-fnuz; do
    max=$([ $scheme = fp8 ] && echo 448 || echo 240)
    expect 0 "run quant --scheme $scheme, NaN 0x$nan" -- "$tl" run quant --scheme $scheme --input x=x$nan.npy --output codes=c.npy --output scales=s.npy
    check "$scheme, NaN 0x$nan: row 0's scale is 4/$max" -- python3 -c "
import sys; sys.path.insert(0, '.'); from npy import floats
s = floats('s.npy'); sys.exit(0 if abs(s[0] * $max - 4) < 1e-6 and abs(s[1] * $max - 1) < 1e-6 else print(s) or 1)"
    expect 0 "check quant --scheme $scheme --input x, NaN 0x$nan" -- "$tl" check quant --scheme $scheme --input x=x$nan.npy
  done
  expect 0 "check quant --scheme fp8-query --input x, NaN 0x$nan" -- "$tl" check quant --scheme fp8-query --input x=x$nan.npy
done

# ---- run indexer --prefix P: bounded by the inputs' rows and kv, not the default 4096 x 4096 ----
python3 -c "
import sys, random; sys.path.insert(0, '.'); from npy import npy
r = random.Random(5); codes = [0x30, 0x38, 0xB0, 0x40, 0x2A]
npy('q.npy', '|u1', '(8, 16, 128)', 'B', [r.choice(codes) for _ in range(8 * 16 * 128)])
npy('k.npy', '|u1', '(40, 128)', 'B', [r.choice(codes) for _ in range(40 * 128)])
npy('ks.npy', '<f4', '(40,)', 'f', [0.01] * 40)
npy('w.npy', '<f4', '(8, 16)', 'f', [0.1] * 128)"
idx_in=(--input q=q.npy --input k=k.npy --input kscale=ks.npy --input w=w.npy)
expect 0 "run indexer --prefix 5 on 8 rows x 40 kv" -- "$tl" run indexer "${idx_in[@]}" --output logits=l.npy --prefix 5
check "row i sees prefix + i + 1 = 6 + i positions, the rest -inf" -- python3 -c "
import sys, math; sys.path.insert(0, '.'); from npy import floats
l = floats('l.npy'); ok = all((j < 6 + i) == math.isfinite(l[i * 40 + j]) for i in range(8) for j in range(40))
sys.exit(0 if ok else 1)"
expect 0 "check indexer --input --prefix 32 (= kv - rows)" -- "$tl" check indexer "${idx_in[@]}" --prefix 32
expect 2 "run indexer --prefix 33 > kv - rows" -- "$tl" run indexer "${idx_in[@]}" --output logits=l.npy --prefix 33
check "says the inputs' bound, 32" -- grep -q "prefix <= kv - rows = 32" <<<"$LAST_ERR"
expect 2 "check indexer --prefix 5 on the default 4096 x 4096" -- "$tl" check indexer --prefix 5
# ---- sim indexer on sm_90a: the pick is the BLOCK_Q the kernel was timed at (run 52's prediction) ----
for h in 32:488.81 64:714.38; do
  expect 0 "sim indexer --hw h200 8K square H = ${h%:*}" -- "$tl" sim indexer --hw h200 --rows 8192 --kv 8192 --heads ${h%:*} --format csv
  check "H = ${h%:*}: BLOCK_Q 8, ${h#*:} us as h200_indexer_sim_run52.csv" -- bash -c '[ "$(cut -d, -f6,21 <<<"$(tail -1 <<<"$0")")" = "8,$1" ]' "$LAST_OUT" "${h#*:}"
done
finish
