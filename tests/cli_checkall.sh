#!/usr/bin/env bash
# `tilelab check all`: every op of the op table checked in one command, one summary row per
# problem. It exits 0 when every check passes; with TILELAB_TEST_FAIL_OP=NAME (the test-only
# switch that corrupts one output element of NAME's check) it exits 1 and names NAME, in its
# error line and in NAME's row; --format json is only JSON (python3's json parses it) and
# --format csv only CSV (python3's csv); --device reaches every op's check as `check OP --device`
# takes it. The real shapes run once, in the release build (about a minute on two cores); the
# sanitizer build (TL_CHECKALL_QUICK=1, set by tests/CMakeLists.txt) runs --quick only.
set -u
tl=$1
. "$(dirname "$0")/lib.sh"

ops=$("$tl" ops --format csv | tail -n +2 | cut -d, -f1 | sort -u)
n_ops=$(wc -l <<<"$ops")

# ---- the real shapes in the release build, --quick in the sanitizer build: only JSON, every op,
# every row passed with cases checked and counts that add up ----
json_rows_pass() { # SEED: LAST_OUT holds check all's JSON
  python3 -c '
import json, sys
rows = json.load(sys.stdin)
ops, seed = set(sys.argv[1].split()), sys.argv[2]
assert {r["op"] for r in rows} == ops, (sorted({r["op"] for r in rows}), sorted(ops))
for r in rows:
    assert set(r) == {"op", "check", "device", "result", "cases", "passed", "failed", "not_run",
                      "not_run_cases", "why_not_run", "first_failure"}, r
    assert r["result"] == "pass" and r["failed"] == 0 and r["first_failure"] is None, r
    assert r["passed"] > 0 and r["cases"] == r["passed"] + r["failed"] + r["not_run"], r
    assert (r["not_run"] == 0) == (r["not_run_cases"] is None) == (r["why_not_run"] is None), r
    assert r["check"].startswith("check " + r["op"] + " ") and r["check"].endswith(" --seed " + seed), r
    assert r["device"], r
' "$ops" "$1" <<<"$LAST_OUT"
}
if [ "${TL_CHECKALL_QUICK:-0}" != 1 ]; then
  expect 0 "check all" -- "$tl" check all --format json --seed 1
  check "check all: only JSON, every op, every row passed" -- json_rows_pass 1
else
  expect 0 "check all --quick --format json" -- "$tl" check all --quick --format json --seed 1
  check "check all --quick: only JSON, every op, every row passed" -- json_rows_pass 1
fi
check "check all: says how many problems passed" -- grep -q "^all [0-9]* problems passed" <<<"$LAST_ERR"

# ---- --quick: each op's small test problem ----
expect 0 "check all --quick" -- "$tl" check all --quick --seed 7
check "quick: the title names the seed and the device" -- \
  grep -qE "^check all --quick: $n_ops problems, seed 7, on (CPU reference only|.*GPU|NVIDIA|AMD)" <<<"$LAST_OUT"
for op in $ops; do
  check "quick: a passed row of $op" -- grep -qE "^ *$op +check $op .* pass " <<<"$LAST_OUT"
done
check "quick: all passed" -- grep -q "^all $n_ops problems passed" <<<"$LAST_OUT"

expect 0 "check all --quick --format csv --device cpu" -- "$tl" check all --quick --format csv --device cpu --seed 7
check "quick csv parses: one row per op, --device cpu in every row's command" -- python3 -c '
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.stdin.read())))
assert sorted(r["op"] for r in rows) == sorted(sys.argv[1].split()), rows
assert all(r["result"] == "pass" and r["failed"] == "0" for r in rows), rows
assert all(r["check"].endswith(" --seed 7 --device cpu") for r in rows), rows
' "$ops" <<<"$LAST_OUT"
check "quick csv: nothing but the table on stdout" -- test "$(head -1 <<<"$LAST_OUT")" = \
  "op,check,device,result,cases,passed,failed,not_run,not_run_cases,why_not_run,first_failure"

# ---- a deliberately failing op: exit 1, named ----
# an exact output (topk's indices: one bit flipped) and a float one (prefill's O: NaN); below, codes
# (quant's) in the table form
for op in topk prefill; do
  expect 1 "check all with $op failing" -- env TILELAB_TEST_FAIL_OP=$op "$tl" check all --quick --format json --seed 7
  check "the error line names $op" -- grep -qE "^tilelab: error: check all: 1 of $n_ops problems failed \($op\)" <<<"$LAST_ERR"
  check "json: $op's row failed with its comparison, the others passed" -- python3 -c '
import json, sys
rows = json.load(sys.stdin)
bad = sys.argv[1]
for r in rows:
    if r["op"] == bad:
        assert r["result"] == "FAIL" and r["failed"] == 1 and r["first_failure"], r
    else:
        assert r["result"] == "pass" and r["failed"] == 0 and r["first_failure"] is None, r
' "$op" <<<"$LAST_OUT"
done
expect 1 "table form with a failing op" -- env TILELAB_TEST_FAIL_OP=quant "$tl" check all --quick --seed 7
check "table: quant's row says FAIL and which comparison" -- \
  grep -qE "^ *quant +check quant .* FAIL .*small .* vs .*: codes: .* differ" <<<"$LAST_OUT"
check "table: the error line names quant" -- grep -q "^tilelab: error: check all: 1 of $n_ops problems failed (quant)" <<<"$LAST_ERR"
expect 1 "check OP sees the switch too" -- env TILELAB_TEST_FAIL_OP=decode "$tl" check decode --batch 2 --seq 40 --kv-heads 2 --gqa 2
check "check decode: a FAIL row" -- grep -q " FAIL " <<<"$LAST_OUT"
expect 0 "another op's check ignores it" -- env TILELAB_TEST_FAIL_OP=decode "$tl" check topk --n 300 --batch 1 --k 64
expect 2 "the switch naming no op" -- env TILELAB_TEST_FAIL_OP=nosuch "$tl" check all --quick
check "its error names the switch" -- grep -q "^tilelab: error: TILELAB_TEST_FAIL_OP: no op 'nosuch'" <<<"$LAST_ERR"

# ---- options ----
expect 2 "--device that check OP refuses" -- "$tl" check all --quick --device tpu
check "the refusal is check OP's own" -- grep -q "^tilelab: error: --device: 'tpu'" <<<"$LAST_ERR"
check "no table after a usage error" -- test -z "$LAST_OUT"
expect 2 "--seed -1" -- "$tl" check all --seed -1
expect 2 "--format xml" -- "$tl" check all --format xml
expect 2 "an unknown option" -- "$tl" check all --tokens 5
expect 2 "a stray argument" -- "$tl" check all moe
expect 0 "check all --help" -- "$tl" check all --help
check "help names --quick and the switch" -- grep -q -- "--quick" <<<"$LAST_OUT"
check "help: the switch is for tests only" -- grep -q "TILELAB_TEST_FAIL_OP=NAME, for tests" <<<"$LAST_OUT"
expect 0 "tilelab help lists check all" -- "$tl" help check
check "help check: check all" -- grep -q "tilelab check all" <<<"$LAST_OUT"

finish
