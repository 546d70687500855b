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
finish
