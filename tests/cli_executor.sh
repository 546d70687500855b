#!/usr/bin/env bash
# The AMD kernels executed on the CPU executor (usage: cli_executor.sh TILELAB SRC): every op's
# check through its gfx942 and gfx950 code, every dtype and scheme with an AMD path, on shapes small
# enough for two cores but of the real sizes where the tiling depends on them (DeepSeek-V3.2's
# hidden 7168, top-k to 64K positions, the indexer's 64 heads, prefill at head dims 128 and 192/128,
# quant rows of 7168); bench refuses the executor; run writes the AMD kernel's output; and the
# mutant (tilelab-mutant, release builds: a wrong B lane mapping in kernels/mma.h, a missing
# barrier in kernels/quant.hip) fails the checks those bugs touch, naming what differs.
# Cost: about two minutes on two cores (release); the sanitizer pass runs the same cases.
set -uo pipefail
tilelab=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_pass ARCH OP ARGS...: the check exits 0, says every comparison passed, and compared on
# the executor (its rows say emu:ARCH)
expect_pass() {
  local arch=$1 op=$2
  shift 2
  local out
  out=$("$tilelab" check "$op" --device "emu:$arch" "$@" 2>&1)
  local rc=$?
  if [ $rc -ne 0 ] || ! grep -q "comparisons passed" <<<"$out" || ! grep -q "emu:$arch vs reference" <<<"$out"; then
    fail "check $op --device emu:$arch $* (exit $rc): $(grep -E 'FAIL|error' <<<"$out" | head -3)"
  else
    echo "ok: check $op --device emu:$arch $* ($(grep -o 'all [0-9]* comparisons passed' <<<"$out"))"
  fi
}

for arch in gfx942 gfx950; do
  for s in fp8 fp8-fnuz mxfp8 mxfp4 fp8-query dispatch; do
    expect_pass $arch quant --scheme $s --rows 3 --k 7168
  done
  expect_pass $arch quant --scheme fp8-query --hadamard --rows 130 --k 8192 --dist outliers
  expect_pass $arch topk --n 4096,65536 --batch 2 --k 512
  expect_pass $arch topk --n 4096 --batch 3 --k 2048 --sorted --dist ties --path stream --split 2
  expect_pass $arch topk --n 1000 --batch 2 --k 64 --dtype bf16 --dist nan --causal
  expect_pass $arch indexer --rows 64 --kv 256 --heads 64
  expect_pass $arch indexer --rows 32 --kv 160 --heads 32 --windows ragged
  expect_pass $arch decode --batch 2 --seq 256
  expect_pass $arch decode --lens 0,1,70 --kv fp8 --gqa 4 --kv-heads 2
  expect_pass $arch decode --kind dual-scope --batch 2 --seq 1024 --topk 256 --heads 64
  expect_pass $arch prefill --seq 130
  expect_pass $arch prefill --seq 200 --dtype fp8 --rotate hadamard
  expect_pass $arch prefill --shape deepseek-v2-lite --seq 70
  for d in bf16 fp8 a16w4 mxfp4 mxfp8; do
    expect_pass $arch moe --dtype $d --tokens 3 --tp 8 --experts 8
  done
done

# bench refuses the executor in one line, exit 2
"$tilelab" bench quant --device emu:gfx950 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "no timing" "$tmp/err" \
  || fail "bench --device emu:gfx950: exit $rc, '$(cat "$tmp/err")'"
"$tilelab" check quant --device emu:gfx999 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "emu:gfx950" "$tmp/err" || fail "an unknown device: exit $rc, '$(cat "$tmp/err")'"

# run: the gfx950 kernel's codes equal the CPU reference's, byte for byte
python3 - "$tmp/x.npy" <<'EOF'
import struct, sys, random
random.seed(7)
rows, k = 2, 256
vals = [random.gauss(0, 1) for _ in range(rows * k)]
bits = b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in vals)
hdr = "{'descr': '<u2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, k)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bits)
EOF
"$tilelab" run quant --scheme fp8 --input x="$tmp/x.npy" --output codes="$tmp/emu.npy" --device emu:gfx950 2>/dev/null \
  || fail "run quant --device emu:gfx950"
"$tilelab" run quant --scheme fp8 --input x="$tmp/x.npy" --output codes="$tmp/cpu.npy" 2>/dev/null || fail "run quant (cpu)"
cmp -s "$tmp/emu.npy" "$tmp/cpu.npy" || fail "run quant: the gfx950 kernel's codes differ from the reference's"

# the mutant: each deliberate bug fails the check it touches
mutant=$(dirname "$tilelab")/tilelab-mutant
if [ -x "$mutant" ]; then
  out=$("$mutant" check indexer --device emu:gfx950 --rows 32 --kv 128 --heads 32 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "FAIL" <<<"$out" || fail "mutant (B lane mapping): check indexer exit $rc"
  out=$("$mutant" check quant --device emu:gfx950 --scheme fp8-query --rows 64 --k 1024 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "elements differ" <<<"$out" || fail "mutant (missing barrier): check quant fp8-query exit $rc"
  out=$("$mutant" check quant --device emu:gfx950 --scheme fp8 --rows 3 --k 7168 2>&1); rc=$?
  [ $rc -eq 0 ] || fail "mutant: the checks its bugs do not touch must still pass (quant fp8 exit $rc)"
  echo "ok: the mutant fails check indexer (B lane mapping) and check quant fp8-query (missing barrier)"
else
  echo "SKIPPED: the executor's mutation checks (tilelab-mutant is built in release builds only)"
fi

[ $fails -eq 0 ] && echo "cli_executor: all passed" || echo "cli_executor: $fails failed"
exit $((fails > 0))
