#!/usr/bin/env bash
# tilelab check moe / bench moe: the no-GPU path passes and says the GPU part was skipped (a GPU
# build must pass instead); bad input gives one 'tilelab: error:' line and exit 2.
set -u
tl=$1
. "$(dirname "$0")/lib.sh"
src=${2:-.}

gpu_build=0 # 1: a GPU build on a machine with a GPU (a GPU build without one takes the no-GPU path)
"$tl" bench moe --tokens 1 >/dev/null 2>"$tmp/bench.err" || true
grep -q "needs a GPU" "$tmp/bench.err" || gpu_build=1

# ---- the default check (DeepSeek-V3.2) ----
if [ $gpu_build -eq 0 ]; then
  expect 0 "check moe (no GPU)" -- "$tl" check moe --seed 1
  check "says the GPU part was skipped" -- grep -q "skipped" <<<"$LAST_OUT"
  check "prints the seed" -- grep -q "seed 1" <<<"$LAST_OUT"
  check "compares the reference with the naive loop" -- grep -q "reference vs naive" <<<"$LAST_OUT"
  check "every row passes" -- bash -c '! grep -q FAIL <<<"$0"' "$LAST_OUT"
  check "names the requested cases it could not check" -- grep -q "^not checked: M=1, M=16, M=256" <<<"$LAST_OUT"
  expect 0 "check moe TP8 cut to 16 experts, fp8, the requested shape runs too" -- \
    "$tl" check moe --dtype fp8 --tp 8 --experts 16 --topk 4 --tokens 1,3 --seed 2
  check "the requested shape is compared" -- grep -q "^ *M=3 *reference vs naive" <<<"$LAST_OUT"
  for d in bf16 fp8 a16w4 mxfp4 mxfp8; do
    expect 0 "check moe --dtype $d --shared 1" -- "$tl" check moe --dtype $d --shared 1 --seed 3
  done
  expect 0 "check moe csv" -- "$tl" check moe --seed 4 --format csv
  check "csv header" -- test "$(head -1 <<<"$LAST_OUT")" = "case,compared,max_abs,max_rel,rel_rms,nmse,tol_rel_rms,nan,result,notes"
  expect 1 "bench moe needs a GPU" -- "$tl" bench moe --tokens 1
  check "bench says why" -- grep -q "needs a GPU: " <<<"$LAST_ERR"
else
  expect 0 "check moe (GPU)" -- "$tl" check moe --experts 16 --topk 4 --tokens 1,16 --seed 1
  check "every row passes" -- grep -q "comparisons passed" <<<"$LAST_OUT"
fi

# ---- help ----
expect 0 "check moe --help" -- "$tl" check moe --help
check "help names the dtypes" -- grep -q "a16w4" <<<"$LAST_OUT"
expect 0 "bench moe --help" -- "$tl" bench moe --help
expect 0 "check --help lists the ops" -- "$tl" check --help
check "the op table lists moe" -- grep -q "moe" <<<"$LAST_OUT"

# ---- bad input: one line, exit 2 ----
expect 2 "check without an op" -- "$tl" check
expect 2 "unknown op" -- "$tl" check frob
expect 2 "unknown dtype" -- "$tl" check moe --dtype fp9
expect 2 "zero tokens" -- "$tl" check moe --tokens 0
expect 2 "malformed tokens" -- "$tl" check moe --tokens 1,x
expect 2 "negative tokens" -- "$tl" check moe --tokens -4
expect 2 "tp not dividing the width" -- "$tl" check moe --tp 3
expect 2 "unknown model" -- "$tl" check moe --model nope
expect 2 "unknown routing" -- "$tl" check moe --routing sideways
expect 2 "unknown option" -- "$tl" check moe --frob 1
expect 2 "option without value" -- "$tl" check moe --dtype
expect 2 "bad seed" -- "$tl" check moe --seed -1
expect 2 "top-k above experts" -- "$tl" check moe --experts 4 --topk 8
expect 2 "absurd width" -- "$tl" check moe --width 100000
expect 2 "bad format" -- "$tl" check moe --format xml
expect 2 "bench: bad stage" -- "$tl" bench moe --stage 3
expect 2 "bench: unknown flush" -- "$tl" bench moe --flush sideways
expect 2 "check has no --flush" -- "$tl" check moe --flush read
expect 2 "bench: empty trace file name" -- "$tl" bench moe --trace ""
expect 2 "check has no --trace" -- "$tl" check moe --trace t.csv

# ---- a routing trace (--routing trace:FILE; tests/data/routing) ----
rt="$src/tests/data/routing"
small=(--experts 8 --topk 2 --hidden 256 --width 256)
if [ $gpu_build -eq 0 ]; then
  expect 0 "check moe on a trace with weights" -- "$tl" check moe "${small[@]}" --routing "trace:$rt/good_e8k2.txt" --seed 5
  check "the trace's 5 tokens are the one case" -- grep -q "^ *M=5 *reference vs naive" <<<"$LAST_OUT"
  check "and no other requested case" -- test "$(grep -c "^ *M=" <<<"$LAST_OUT")" -eq 1
  check "every row passes" -- bash -c '! grep -q FAIL <<<"$0"' "$LAST_OUT"
  check "the description names the trace" -- grep -q "routing trace:.*good_e8k2.txt" <<<"$LAST_OUT$LAST_ERR"
  expect 0 "check moe on the first 3 tokens of an ids-only trace" -- "$tl" check moe "${small[@]}" --routing "trace:$rt/ids_e8k2.txt" --tokens 3 --seed 5
fi
printf '{"hidden_size": 256, "num_hidden_layers": 2, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256}\n' >"$tmp/e8k2.json"
expect 0 "sim moe takes the token count from the trace" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt/good_e8k2.txt" --format csv
check "one case of 5 tokens, both stages" -- test "$(tail -n +2 <<<"$LAST_OUT" | cut -d, -f5 | tr '\n' ' ')" = "5 5 "
expect 0 "sim moe --tokens within the trace" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt/good_e8k2.txt" --tokens 1,5 --format csv
expect 2 "sim moe --tokens beyond the trace" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt/good_e8k2.txt" --tokens 6
check "says how many it holds" -- grep -q "holds 5" <<<"$LAST_ERR"
# every malformation: exit 2, one 'tilelab: error:' line naming the file (and line)
for c in "count:2: 3 fields" "range:2: expert id 8 outside" "duplicate:2: expert 5 appears twice" \
         "nan_weight:2: weight 'nan' is not a number" "negative_weight:2: weight -1" "mixed:2: has no weights" "empty: no tokens"; do
  name=${c%%:*}; says=${c#*:}
  expect 2 "trace bad_$name" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt/bad_$name.txt"
  check "trace bad_$name: says '$says'" -- grep -q "bad_$name.txt:$says" <<<"$LAST_ERR"
  check "trace bad_$name: one line" -- test "$(wc -l <<<"$LAST_ERR")" -eq 1
  expect 2 "check moe, trace bad_$name" -- "$tl" check moe "${small[@]}" --routing "trace:$rt/bad_$name.txt" --seed 1
  expect 2 "bench moe, trace bad_$name (before needing a GPU)" -- "$tl" bench moe "${small[@]}" --routing "trace:$rt/bad_$name.txt"
done
expect 2 "trace of the wrong k (a top-2 trace for DeepSeek's top-8)" -- "$tl" sim moe --routing "trace:$rt/good_e8k2.txt"
expect 2 "trace missing" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt/none.txt"
expect 2 "trace a folder" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$rt"
awk 'BEGIN{for(i=0;i<=1048576;i++) print "0 1"}' >"$tmp/long.txt"
expect 2 "trace of 2^20 + 1 tokens" -- "$tl" sim moe --model "$tmp/e8k2.json" --routing "trace:$tmp/long.txt"
check "says too many" -- grep -q "more than 1048576 tokens" <<<"$LAST_ERR"

finish
