#!/usr/bin/env bash
# `tilelab sim step` and `draw step`: the step covers every model preset the issue names
# (DeepSeek-V3.2, GLM-5, Kimi-K2.6, Qwen3-30B-A3B, Mixtral-8x7B, gpt-oss-120b) on every hardware
# preset (mi355x, mi300x, h200, h100), decode and prefill, and its CSV's step row is the sum of its
# kinds; the seed's GLM-5.3 step reads 25.5 GB of experts; the calls name their `sim OP` commands
# and running one gives the call's time; bad input is one error line and exit 2; draw step writes
# a PNG and leaves nothing on a refusal.
# usage: cli_step.sh TILELAB SRC
set -u
tl=$1
src=$2
. "$(dirname "$0")/lib.sh"

# the kinds' times and shares sum to the step row's (each cell rounded to 0.01 us, 0.1 %)
sum_kinds() {
  awk -F, 'NR > 1 && $1 != "step" && $1 != "per token" { t += $3; s += $4; n++ }
           $1 == "step" { step = $3 }
           END { d = t - step; if (d < 0) d = -d; e = s - 100; if (e < 0) e = -e
                 exit !(n > 0 && step > 0 && d <= 0.01 * n && e <= 0.1 * n) }' <<<"$LAST_OUT"
}

for m in deepseek-v3.2 glm-5 kimi-k2.6 qwen3-30b-a3b mixtral-8x7b gpt-oss-120b; do
  for h in mi355x mi300x h200 h100; do
    expect 0 "$m on $h, decode tp 8" -- "$tl" sim step --model "$m" --hw "$h" --tp 8 --batch 16 --context 4096 --format csv
    check "$m on $h, decode: the kinds sum to the step" -- sum_kinds
    expect 0 "$m on $h, prefill tp 8" -- "$tl" sim step --model "$m" --hw "$h" --tp 8 --phase prefill --context 2048 --format csv
    check "$m on $h, prefill: the kinds sum to the step" -- sum_kinds
  done
done
expect 0 "glm-5 decode, EP 8 with data-parallel attention" -- "$tl" sim step --model glm-5 --hw mi355x --ep 8 --batch 64 --format csv
check "EP 8: dispatch and combine charged" -- grep -q "^dispatch," <<<"$LAST_OUT"
expect 0 "deepseek-v3.2 decode, EP 8 = TP 8, MTP 2" -- "$tl" sim step --model deepseek-v3.2 --hw h200 --tp 8 --ep 8 --batch 8 --tokens-per-step 2 --format csv
expect 0 "a config.json by path" -- "$tl" sim step --model "$src/presets/models/qwen3-30b-a3b.json" --hw h200 --batch 4 --format csv

# the seed's step: 75 MoE layers x 9 experts of FP8 weights, 25.5 GB, about 0.5 ms at 8 GPUs' ceiling
expect 0 "glm-5 decode on 8 MI355X, 1 token" -- "$tl" sim step --model glm-5 --hw mi355x --tp 8 --batch 1 --context 1024
check "25.5 GB of expert weights, 0.51 ms" -- grep -q "expert weights read a step: 25.49 GB over 8 GPUs, 0.508 ms" <<<"$LAST_OUT"
check "the 3 dense and 75 MoE layers" -- bash -c 'grep -q "^dense layer  *3 " <<<"$0" && grep -q "^  moe layer  *75 " <<<"$0"' "$LAST_OUT"
check "what is not modelled is named" -- grep -q "^not modelled: norms.*8 heads a GPU" <<<"$LAST_OUT"
expect 0 "gpt-oss: the sliding window named" -- "$tl" sim step --model gpt-oss-120b --hw h100 --tp 4
check "sliding_window 128 and head_dim 64 named" -- bash -c 'grep -q "sliding_window 128" <<<"$0" && grep -q "head_dim 64" <<<"$0"' "$LAST_OUT"

# a call's command gives the call's time (the op row's own sim)
expect 0 "calls table" -- "$tl" sim step --model glm-5 --hw mi355x --tp 8 --batch 32 --rows calls --format csv
line=$(grep '^moe layer,moe,moe stage 1,' <<<"$LAST_OUT")
cmd=$(python3 -c 'import csv,sys; r=next(csv.reader([sys.argv[1]])); print(r[10])' "$line")
want=$(python3 -c 'import csv,sys; r=next(csv.reader([sys.argv[1]])); print("%.2f" % float(r[4]))' "$line")
check "the moe stage 1 call names its sim moe command" -- grep -q "^sim moe --hw mi355x --model glm-5 --dtype fp8 --tokens 32 --tp 8 --stage 1$" <<<"$cmd"
# shellcheck disable=SC2086
expect 0 "that command" -- "$tl" $cmd --format csv
check "it gives the call's time ($want us)" -- bash -c 'python3 -c "import csv,sys; r=list(csv.DictReader(sys.stdin)); sys.exit(0 if r[0][\"time_us\"]==sys.argv[1] else r[0][\"time_us\"])" "$0" <<<"$1"' "$want" "$LAST_OUT"

# bad input: one error line, exit 2
expect 2 "tp not dividing the heads" -- "$tl" sim step --model glm-5 --tp 3
expect 2 "an unknown phase" -- "$tl" sim step --phase train
expect 2 "an unknown expert dtype" -- "$tl" sim step --experts int3
expect 2 "an unknown dense dtype" -- "$tl" sim step --dense fp4
expect 2 "an unknown kv dtype" -- "$tl" sim step --kv-dtype int8
expect 2 "batch 0" -- "$tl" sim step --batch 0
expect 2 "a context list of the wrong length" -- "$tl" sim step --batch 3 --context 10,20
expect 2 "context 0" -- "$tl" sim step --context 0
expect 2 "too many speculative tokens for MLA" -- "$tl" sim step --tokens-per-step 5
expect 2 "ep with another tp" -- "$tl" sim step --tp 2 --ep 8
expect 2 "ep on a dense model" -- "$tl" sim step --model mistral-7b --ep 2
expect 2 "an unknown table" -- "$tl" sim step --rows ops --format csv
expect 2 "an unknown model" -- "$tl" sim step --model llama-9
expect 2 "an unknown preset" -- "$tl" sim step --hw tpu

# draw step
expect 0 "draw step" -- "$tl" draw step --model glm-5 --hw mi355x --tp 8 --batch 1,32 --measured 1:17.7,32:27.0 --measured-on "seed 000, vLLM, 8 MI355X" -o "$tmp/step.png"
check "a PNG" -- bash -c '[ "$(head -c 8 "$0" | od -An -tx1 | tr -d " \n")" = "89504e470d0a1a0a" ]' "$tmp/step.png"
mkdir -p "$tmp/out"
expect 2 "draw step: measured points without their source" -- "$tl" draw step --measured 1:17.7 -o "$tmp/out/a.png"
expect 2 "draw step: a bad measured point" -- "$tl" draw step --measured 1:x --measured-on seed -o "$tmp/out/a.png"
expect 2 "draw step: too many bars" -- "$tl" draw step --batch 1,2,3,4,5,6,7 -o "$tmp/out/a.png"
expect 2 "draw step: no -o" -- "$tl" draw step
expect 2 "draw step: a bad extension" -- "$tl" draw step -o "$tmp/out/a.gif"
check "nothing left by the refusals" -- bash -c '[ -z "$(ls -A "$0")" ]' "$tmp/out"
finish
