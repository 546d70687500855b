#!/usr/bin/env bash
# Configs and presets read right (issue 23, items 6 and 7): which layers of a config.json are MoE,
# shared-expert widths, real configs of other families (tests/data/configs/README.md says where
# each comes from), a typo in a hardware preset or overlay, and preset files that are pipes or
# too large.   bash tests/cli_harden_configs.sh <tilelab> <source-dir>
set -u
tl=$1
src=$2
. "$src/tests/lib.sh"
cfg=$src/tests/data/configs

# row FILE: the `models FILE --format csv` row's first nine fields
# (name,hidden,experts,top_k,expert_width,shared,layers,moe_layers,dense_width)
row() { "$tl" models "$1" --format csv | awk -F, 'NR == 2 { print $1","$2","$3","$4","$5","$6","$7","$8","$9 }'; }
# is WANT FILE: the row is WANT
is() { local got; got=$(row "$2"); [ "$got" = "$1" ] || { echo "  $2: got $got, wanted $1"; return 1; }; }

# ---- item 7: real configs of other families (expert width in intermediate_size, text_config) ----
for m in mixtral-8x7b gpt-oss-20b minimax-m1 llama-4-scout qwen1.5-moe-a2.7b; do
  expect 0 "models $m" -- "$tl" models "$cfg/$m.json"
done
check "Mixtral-8x7B: E 8, top-2, width 14336, 32 MoE layers" -- is "mixtral-8x7b,4096,8,2,14336,0,32,32,0" "$cfg/mixtral-8x7b.json"
check "gpt-oss-20b: E 32, top-4, width 2880, 24 layers" -- is "gpt-oss-20b,2880,32,4,2880,0,24,24,0" "$cfg/gpt-oss-20b.json"
check "MiniMax-M1: E 32, top-2, width 9216, 80 layers" -- is "minimax-m1,6144,32,2,9216,0,80,80,0" "$cfg/minimax-m1.json"
check "Llama-4 Scout (text_config): E 16 + 1 shared, top-1, width 8192, dense 16384" -- \
  is "llama-4-scout,5120,16,1,8192,1,48,48,16384" "$cfg/llama-4-scout.json"
for m in mixtral-8x7b gpt-oss-20b minimax-m1 llama-4-scout; do
  expect 0 "sim moe --model $m" -- "$tl" sim moe --model "$cfg/$m.json" --hw h200 --dtype bf16 --tokens 1,64 --format csv
done
check "sim moe reads Llama-4's shape" -- grep -q "E 16 + 1 shared.*, top-1, width 8192" <<<"$LAST_ERR$LAST_OUT"

# ---- item 6: shared_expert_intermediate_size is one shared expert of that width ----
check "Qwen1.5-MoE: one shared expert of width 5632, modelled as 4 of the routed width 1408, 24 MoE layers" -- \
  is "qwen1.5-moe-a2.7b,2048,60,4,1408,4,24,24,5632" "$cfg/qwen1.5-moe-a2.7b.json"
sed 's/"shared_expert_intermediate_size": 5632/"shared_expert_intermediate_size": 5000/' \
  "$cfg/qwen1.5-moe-a2.7b.json" >"$tmp/shared_odd.json"
expect 2 "a shared width that is no whole number of experts" -- "$tl" models "$tmp/shared_odd.json"
check "its message names the widths" -- grep -q "width 5000" <<<"$LAST_ERR"
printf '{"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "n_shared_experts": 1}\n' >"$tmp/dense_shared.json"
expect 2 "shared experts on a dense model" -- "$tl" models "$tmp/dense_shared.json"

# ---- item 6: which layers are MoE ----
# moe NAME EXTRA: a 58-layer MoE config with EXTRA keys (a JSON fragment ending in a comma, or "")
moe() {
  printf '{"hidden_size": 256, "num_hidden_layers": 58, "moe_intermediate_size": 128, "intermediate_size": 512, %s "num_experts": 8, "num_experts_per_tok": 2}\n' "$2" >"$tmp/$1.json"
}
moe sparse2 '"decoder_sparse_step": 2,'
check "decoder_sparse_step 2: 29 MoE layers of 58 (Qwen2-MoE: (i + 1) % 2 == 0)" -- is "sparse2,256,8,2,128,0,58,29,512" "$tmp/sparse2.json"
moe freq2 '"moe_layer_freq": 2,'
check "moe_layer_freq 2: 29 MoE layers (DeepSeek: i % 2 == 0)" -- is "freq2,256,8,2,128,0,58,29,512" "$tmp/freq2.json"
moe freq2k3 '"moe_layer_freq": 2, "first_k_dense_replace": 3,'
check "moe_layer_freq 2 after 3 dense layers: 4, 6, ..., 56 = 27" -- is "freq2k3,256,8,2,128,0,58,27,512" "$tmp/freq2k3.json"
moe mlponly '"mlp_only_layers": [0, 5, 57],'
check "mlp_only_layers [0, 5, 57]: 55 MoE layers" -- is "mlponly,256,8,2,128,0,58,55,512" "$tmp/mlponly.json"
moe interleave '"interleave_moe_layer_step": 2,'
check "interleave_moe_layer_step 2: 29 MoE layers (Llama-4 Maverick's rule)" -- is "interleave,256,8,2,128,0,58,29,512" "$tmp/interleave.json"
moe listed '"moe_layers": [1, 3, 3], "decoder_sparse_step": 5,'
check "moe_layers [1, 3, 3] decides alone: 2 MoE layers" -- is "listed,256,8,2,128,0,58,2,512" "$tmp/listed.json"
expect 0 "sim moe on a model with 29 MoE layers" -- "$tl" sim moe --model "$tmp/sparse2.json" --hw h200 --dtype bf16 --tokens 1 --format csv
moe badindex '"mlp_only_layers": [0, 58],'
expect 2 "mlp_only_layers holding 58 of 58 layers" -- "$tl" models "$tmp/badindex.json"
check "the message names the list" -- grep -q "mlp_only_layers\[1\]" <<<"$LAST_ERR"
moe badlist '"moe_layers": "all",'
expect 2 "moe_layers not a list" -- "$tl" models "$tmp/badlist.json"
moe step0 '"decoder_sparse_step": 0,'
expect 2 "decoder_sparse_step 0" -- "$tl" models "$tmp/step0.json"
moe nomoe '"moe_layers": [],'
expect 2 "rules that leave no MoE layer" -- "$tl" models "$tmp/nomoe.json"
check "the message says no MoE layer" -- grep -q "no MoE layer" <<<"$LAST_ERR"

# ---- item 6: an unknown key in a hardware preset or overlay names the key and the file ----
printf '{"ceilings": {"bf16_tflopz": {"measured": 700}}}\n' >"$tmp/typo_ceiling.json"
expect 2 "overlay with bf16_tflopz" -- "$tl" hw show "h200,$tmp/typo_ceiling.json"
check "names the key and the file" -- grep -q "typo_ceiling.json: unknown key 'ceilings.bf16_tflopz'" <<<"$LAST_ERR"
printf '{"ceilings": {"bf16_tflops": {"mesured": 700}}}\n' >"$tmp/typo_value.json"
expect 2 "overlay with ceilings.bf16_tflops.mesured" -- "$tl" sim moe --hw "h200,$tmp/typo_value.json" --tokens 1
printf '{"launch_uss": 3}\n' >"$tmp/typo_top.json"
printf '{"device": "good", "ceilings": {"bf16_tflops": {"measured": 700}}}\n' >"$tmp/good.json"
expect 2 "overlay with launch_uss after a good one" -- "$tl" hw show "h200,$tmp/good.json,$tmp/typo_top.json"
check "blames the file with the typo" -- grep -q "typo_top.json: unknown key 'launch_uss'" <<<"$LAST_ERR"
sed 's/"cycles": 4/"cycle": 4/' "$src/presets/hw/h200.json" >"$tmp/typo_instr.json"
expect 2 "preset with an instruction's 'cycle'" -- "$tl" hw show "$tmp/typo_instr.json"
check "names the instruction" -- grep -q "matrix_instructions\[0\].cycle'" <<<"$LAST_ERR"
expect 0 "a bench roofline result is still an overlay" -- "$tl" hw show "h200,$src/bench/results/2026-11-29_h200_roofline.json"
"$tl" hw show mi355x --format json >"$tmp/mi355x_shown.json"
expect 0 "hw show --format json loads back" -- "$tl" hw show "$tmp/mi355x_shown.json"

# ---- preset files: a pipe never blocks, a file over 16 MiB is refused with its size ----
mkfifo "$tmp/pipe.json"
expect 2 "models PIPE" -- timeout 10 "$tl" models "$tmp/pipe.json"
expect 2 "hw show PIPE" -- timeout 10 "$tl" hw show "$tmp/pipe.json"
expect 2 "sim moe --hw h200,PIPE" -- timeout 10 "$tl" sim moe --hw "h200,$tmp/pipe.json" --tokens 1
check "a pipe is not a regular file" -- grep -q "not a regular file (a named pipe)" <<<"$LAST_ERR"
{ printf '{"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "pad": "'
  head -c 17825792 /dev/zero | tr '\0' x; printf '"}\n'; } >"$tmp/big.json"
expect 2 "a 17 MiB config" -- "$tl" models "$tmp/big.json"
check "says the size and the cap" -- grep -q "17.0 MiB, over the 16 MiB" <<<"$LAST_ERR"
finish
