#!/usr/bin/env bash
# The command's frame: help, version, dispatch, and one-line errors with exit 2.
set -u
tl=$1
. "$(dirname "$0")/lib.sh"
expect 0 "--help" -- "$tl" --help
check "--help lists numerics" -- grep -q "^  numerics" <<<"$LAST_OUT"
expect 0 "--version" -- "$tl" --version
check "version line" -- grep -Eq '^tilelab [0-9]+\.[0-9]+\.[0-9]+$' <<<"$LAST_OUT"
expect 0 "help numerics" -- "$tl" help numerics
expect 0 "help bench" -- "$tl" help bench
expect 2 "unknown command" -- "$tl" frobnicate
expect 2 "help on unknown command" -- "$tl" help frobnicate
expect 2 "unknown bench" -- "$tl" bench frobnicate
expect 2 "unknown draw" -- "$tl" draw frobnicate
# the tour: every step runs and every picture it promises is written (about 8 s, 25 s with ASan)
expect 0 "tour" -- "$tl" tour --out "$tmp/tour"
check "tour: no step failed" -- grep -Eq '^tilelab tour: [0-9]+ steps, 0 failed' <<<"$LAST_OUT"
# long tables show a few rows and the command that prints them all; the whole tour stays short
check "tour: the FP8 table cut, naming its command" -- grep -Eq '^ +\.\.\. [0-9]+ more lines; all of them: tilelab numerics table e4m3fn$' <<<"$LAST_OUT"
check "tour: its first and last codes shown" -- grep -Eq '^ +255 +0xFF .* nan$' <<<"$LAST_OUT"
check "tour: under 260 lines" -- test "$(wc -l <<<"$LAST_OUT")" -lt 260
for pic in moe-tiles padding timeline roofline mfma topk-split decode-shards dispatch-bytes prefill-tiles; do
  check "tour wrote $pic.png" -- test "$(head -c 4 "$tmp/tour/$pic.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e47"
done
finish
