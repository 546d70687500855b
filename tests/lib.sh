# Shared helpers of the tests/cli_*.sh scripts (sourced, not run). Each script calls
#   expect CODE DESCRIPTION -- command...   run it; exit CODE wanted; for CODE 2 exactly one
#                                           'tilelab: error:' line on stderr. Sets LAST_OUT, LAST_ERR.
#   check DESCRIPTION -- command...         a test on LAST_OUT / LAST_ERR (any command; 0 = pass)
#   finish                                  prints 'N passed, M failed' and exits non-zero on failure
# and may use $tmp, a scratch folder removed at exit.
fail=0; pass=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() {
  local want=$1 what=$2; shift 3
  local out err rc
  err=$(mktemp); out=$("$@" 2>"$err"); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL: $what: exit $rc, wanted $want"; cat "$err"; fail=$((fail+1))
  elif [ "$want" -eq 2 ] && { [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q '^tilelab: error: ' "$err"; }; then
    echo "FAIL: $what: wanted one 'tilelab: error:' line, got:"; cat "$err"; fail=$((fail+1))
  else pass=$((pass+1)); fi
  LAST_ERR=$(cat "$err"); rm -f "$err"; LAST_OUT=$out
}
check() {
  local what=$1; shift 2
  if "$@"; then pass=$((pass+1)); else echo "FAIL: $what"; echo "$LAST_OUT" | head -8; fail=$((fail+1)); fi
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
