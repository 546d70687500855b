#!/usr/bin/env bash
# The command's frame: help, version, dispatch, and one-line errors with exit 2.
set -u
tl=$1
fail=0; pass=0
expect() { # expect CODE DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  local out err rc
  err=$(mktemp); out=$("$@" 2>"$err"); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL: $what: exit $rc, wanted $want"; cat "$err"; fail=$((fail+1))
  elif [ "$want" -eq 2 ] && { [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q '^tilelab: error: ' "$err"; }; then
    echo "FAIL: $what: wanted one 'tilelab: error:' line, got:"; cat "$err"; fail=$((fail+1))
  else pass=$((pass+1)); fi
  rm -f "$err"; LAST_OUT=$out
}
expect 0 "--help" -- "$tl" --help
echo "$LAST_OUT" | grep -q "^  numerics" || { echo "FAIL: --help lists no numerics"; fail=$((fail+1)); }
expect 0 "--version" -- "$tl" --version
echo "$LAST_OUT" | grep -Eq '^tilelab [0-9]+\.[0-9]+\.[0-9]+$' || { echo "FAIL: version line '$LAST_OUT'"; fail=$((fail+1)); }
expect 0 "help numerics" -- "$tl" help numerics
expect 0 "help bench" -- "$tl" help bench
expect 2 "unknown command" -- "$tl" frobnicate
expect 2 "help on unknown command" -- "$tl" help frobnicate
expect 2 "unknown bench" -- "$tl" bench frobnicate
expect 2 "unknown draw" -- "$tl" draw frobnicate
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
