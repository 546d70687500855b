#!/usr/bin/env bash
# tilelab hw / models / sim moe / sim paged-decode / bench sim: outputs, CSV columns, and bad input
# (one 'tilelab: error:' line, exit 2).
set -u
tl=$1
. "$(dirname "$0")/lib.sh"
src=${2:-.}

# ---- presets ----
expect 0 "hw list" -- "$tl" hw list --format csv
check "hw list has four presets" -- test "$(echo "$LAST_OUT" | tail -n +2 | cut -d, -f1 | tr '\n' ' ')" = "h100 h200 mi300x mi355x "
expect 0 "hw show mi355x" -- "$tl" hw show mi355x
check "hw show lists the f8f6f4 instruction" -- grep -q "v_mfma_scale_f32_16x16x128_f8f6f4" <<<"$LAST_OUT"
expect 0 "hw show json" -- "$tl" hw show h200 --format json
check "hw show json parses" -- python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["matrix_instructions"]' <<<"$LAST_OUT"
expect 0 "hw show FILE" -- "$tl" hw show "$src/presets/hw/mi300x.json"
expect 2 "hw show unknown" -- "$tl" hw show mi999
check "unknown preset lists the known ones" -- grep -q "mi355x" <<<"$LAST_ERR"
expect 2 "hw show nothing" -- "$tl" hw show
expect 2 "hw unknown subcommand" -- "$tl" hw frob
printf '{\n  "name": "x",\n  "cus": 12,,\n}\n' >"$tmp/bad.json"
expect 2 "malformed hw JSON" -- "$tl" hw show "$tmp/bad.json"
check "malformed JSON names file, line and column" -- grep -q "bad.json:3:[0-9]*: malformed JSON" <<<"$LAST_ERR"
printf '{"device": "test H200", "date": "2026-11-29", "ceilings": {"hbm_read_gbps": {"measured": 4500}}}\n' >"$tmp/ov.json"
expect 0 "hw overlay" -- "$tl" hw show "h200,$tmp/ov.json" --format csv
check "overlay applied" -- grep -q "^hbm_read_gbps,,4800,4500,GB/s$" <<<"$LAST_OUT"
expect 0 "models" -- "$tl" models --format csv
check "eleven models" -- test "$(echo "$LAST_OUT" | tail -n +2 | wc -l)" -eq 11
check "glm-5 has 75 MoE layers" -- grep -q "^glm-5,6144,256,8,2048,1,78,75," <<<"$LAST_OUT"
expect 2 "models unknown" -- "$tl" models gpt-9
printf '{"hidden_size": 64, "num_hidden_layers": 2}\n' >"$tmp/cfg.json"
expect 2 "config without width" -- "$tl" models "$tmp/cfg.json"
check "missing field is named" -- grep -q "intermediate_size" <<<"$LAST_ERR"

# ---- sim moe ----
expect 0 "sim moe defaults csv (routed experts only)" -- "$tl" sim moe --shared 0 --format csv
hdr=$(echo "$LAST_OUT" | head -1)
check "routes at random by default, seed 1, with the kernel tilelab ships" -- test "$(echo "$LAST_OUT" | awk -F, 'NR==2{print $7","$8","$9}')" = "random,1,tilelab"
for col in tokens active_experts tiles padding k_padding flops_useful flops_issued hbm_bytes intensity time_us limiter; do
  check "csv column $col" -- grep -Eq "(^|,)$col(,|$)" <<<"$hdr"
done
check "14 rows (7 token counts x 2 stages)" -- test "$(echo "$LAST_OUT" | tail -n +2 | wc -l)" -eq 14
col() { echo "$hdr" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
row1=$(echo "$LAST_OUT" | awk -F, 'NR==2')
check "M=1: 8 tiles, padding 16" -- test "$(echo "$row1" | cut -d, -f"$(col tiles)"),$(echo "$row1" | cut -d, -f"$(col padding)")" = "8,16"
expect 0 "sim moe M=32,512" -- "$tl" sim moe --tokens 32,512 --stage 1 --shared 0 --routing balanced --format csv
check "balanced: M=32 all 256 experts, M=512 padding 1" -- test "$(echo "$LAST_OUT" | tail -n +2 | cut -d, -f"$(col active_experts)",$(col padding) | tr '\n' ' ')" = "256,16 256,1 "
expect 0 "kimi fills at 768" -- "$tl" sim moe --model kimi-k2.6 --dtype a16w4 --tokens 768 --stage 2 --routing balanced --format csv
check "balanced: kimi padding 1 at 768" -- test "$(echo "$LAST_OUT" | tail -1 | cut -d, -f"$(col padding)")" = "1"
expect 0 "sim moe json" -- "$tl" sim moe --hw h200 --dtype bf16 --tokens 1,64 --tp 8 --format json
check "json parses, numbers are numbers" -- python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d)==4 and isinstance(d[0]["time_us"], (int,float))' <<<"$LAST_OUT"
expect 0 "sim moe table" -- "$tl" sim moe --routing zipf:1.1 --seed 3 --tokens 16
expect 0 "sim moe user config" -- "$tl" sim moe --model "$src/presets/models/glm-5.json" --tokens 1 --format csv
cfg_out=$LAST_OUT
expect 0 "sim moe preset glm-5" -- "$tl" sim moe --model glm-5 --tokens 1 --format csv
check "the preset's file reads as the preset" -- test "$cfg_out" = "$LAST_OUT"
printf '3,1\n0,2\n' >"$tmp/trace.csv"
printf '{"hidden_size": 512, "num_hidden_layers": 2, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 256}\n' >"$tmp/small.json"
expect 0 "trace routing" -- "$tl" sim moe --model "$tmp/small.json" --routing "trace:$tmp/trace.csv" --tokens 2 --stage 1 --format csv
check "trace: 4 experts active" -- test "$(echo "$LAST_OUT" | tail -1 | cut -d, -f"$(col active_experts)")" = "4"

expect 2 "tokens 0" -- "$tl" sim moe --tokens 0
expect 2 "tokens negative" -- "$tl" sim moe --tokens -5
expect 2 "tokens 2^31" -- "$tl" sim moe --tokens 2147483648
expect 2 "tokens too many edges" -- "$tl" sim moe --tokens 2147483647
expect 2 "tokens garbage" -- "$tl" sim moe --tokens 1,x
expect 2 "unknown hw" -- "$tl" sim moe --hw mi999
expect 2 "unknown model" -- "$tl" sim moe --model gpt-9
expect 2 "unknown dtype" -- "$tl" sim moe --dtype fp16
expect 2 "unknown routing" -- "$tl" sim moe --routing hot
expect 2 "bad zipf" -- "$tl" sim moe --routing zipf:-1
expect 2 "missing trace" -- "$tl" sim moe --routing "trace:$tmp/none.csv"
expect 2 "stage 3" -- "$tl" sim moe --stage 3
expect 2 "tile height 8" -- "$tl" sim moe --kernel generic --tile-m 8
check "tile height message" -- grep -q "tile height 8" <<<"$LAST_ERR"
expect 2 "tile height 24" -- "$tl" sim moe --kernel generic --tile-m 24
expect 2 "--tile-m without --kernel generic" -- "$tl" sim moe --tile-m 32
check "says the option is the generic kernel's" -- grep -q "add --kernel generic" <<<"$LAST_ERR"
expect 2 "--cu-gbps with --kernel tilelab" -- "$tl" sim moe --kernel tilelab --cu-gbps 40
expect 2 "tp 3" -- "$tl" sim moe --tp 3
expect 2 "tp 0" -- "$tl" sim moe --tp 0
expect 2 "unknown option" -- "$tl" sim moe --frob 1
expect 2 "option without value" -- "$tl" sim moe --tokens
expect 2 "bad format" -- "$tl" sim moe --format xml
expect 2 "cu-gbps 0" -- "$tl" sim moe --kernel generic --cu-gbps 0
expect 2 "cu-gbps nan" -- "$tl" sim moe --kernel generic --cu-gbps nan
expect 0 "cu-gbps 36" -- "$tl" sim moe --hw h200 --dtype bf16 --kernel generic --tile-n 32 --cu-gbps 36 --tokens 1 --stage 1 --format csv
slow_t=$(echo "$LAST_OUT" | tail -1 | cut -d, -f"$(col time_us)")
expect 0 "cu-gbps default" -- "$tl" sim moe --hw h200 --dtype bf16 --kernel generic --tile-n 32 --tokens 1 --stage 1 --format csv
base_t=$(echo "$LAST_OUT" | tail -1 | cut -d, -f"$(col time_us)")
check "a slower per-CU stream (36 < the preset's 55 GB/s) takes longer" -- awk -v a="$slow_t" -v b="$base_t" 'BEGIN{exit !(a > b)}'
printf '{"hidden_size": 64, "num_hidden_layers": 2, "n_routed_experts": 4, "num_experts_per_tok": 0, "moe_intermediate_size": 32}\n' >"$tmp/k0.json"
expect 2 "k = 0" -- "$tl" sim moe --model "$tmp/k0.json"
printf '{"hidden_size": 64, "num_hidden_layers": 2, "n_routed_experts": 4, "num_experts_per_tok": 5, "moe_intermediate_size": 32}\n' >"$tmp/kE.json"
expect 2 "k > E" -- "$tl" sim moe --model "$tmp/kE.json"
printf '{"hidden_size": 64, "num_hidden_layers": 2, "n_routed_experts": 0}\n' >"$tmp/e0.json"
expect 2 "E = 0" -- "$tl" sim moe --model "$tmp/e0.json"
printf '{"hidden_size": 64,\n "num_hidden_layers": 2\n "n_routed_experts": 4}\n' >"$tmp/mal.json"
expect 2 "malformed model JSON" -- "$tl" sim moe --model "$tmp/mal.json"
check "model error has line and column" -- grep -q "mal.json:3:[0-9]*:" <<<"$LAST_ERR"

# ---- sim paged-decode ----
expect 0 "paged-decode" -- "$tl" sim paged-decode --kv-dtype fp8 --gqa 4 --batch 32 --seq 65536 --kv-heads 8 --format csv
dh=$(echo "$LAST_OUT" | head -1)
for c in flops hbm_bytes intensity time_us limiter; do check "decode column $c" -- grep -Eq "(^|,)$c(,|$)" <<<"$dh"; done
ic=$(echo "$dh" | tr ',' '\n' | grep -nx intensity | cut -d: -f1)
check "FP8 gqa4 intensity ~7.8" -- awk -F, -v c="$ic" 'NR==2{exit !($c>7.41 && $c<8.19)}' <<<"$LAST_OUT"
expect 2 "decode missing --gqa" -- "$tl" sim paged-decode --batch 1 --seq 1 --kv-heads 1
expect 2 "decode bad kv dtype" -- "$tl" sim paged-decode --kv-dtype fp4 --gqa 1 --batch 1 --seq 1 --kv-heads 1
expect 2 "decode seq 0" -- "$tl" sim paged-decode --gqa 1 --batch 1 --seq 0 --kv-heads 1
expect 2 "sim unknown" -- "$tl" sim frob

# ---- bench sim ----
expect 0 "bench sim" -- "$tl" bench sim --format csv
check "bench sim ran every combination (4 presets x 11 models x 5 dtypes x 14 token counts x 2 stages)" -- test "$(echo "$LAST_OUT" | tail -1 | cut -d, -f6)" -eq 6160
# ---- the seed's GLM-5.3 decode arithmetic (examples/glm5_decode_bytes.sh) ----
expect 0 "glm5 decode example" -- bash "$src/examples/glm5_decode_bytes.sh" "$tl" 8
check "FP8: about 25.5 GB and 0.5 ms" -- awk '$1=="fp8"{ok = $4 > 25.3 && $4 < 25.7 && $5 > 0.48 && $5 < 0.55} END{exit !ok}' <<<"$LAST_OUT"
check "MXFP4 about halves it" -- awk '$1=="fp8"{f=$4} $1=="mxfp4"{m=$4} END{exit !(m/f > 0.5 && m/f < 0.56)}' <<<"$LAST_OUT"
# ---- --kernel tilelab (the default): the bench's prediction (this project's kernel, after an L2 flush) ----
expect 0 "sim moe --kernel tilelab" -- "$tl" sim moe --hw h200 --dtype a16w4 --tokens 1 --stage 1 --kernel tilelab --format csv
hdr=$(head -1 <<<"$LAST_OUT")
k_t=$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col time_us)")
expect 0 "sim moe by default" -- "$tl" sim moe --hw h200 --dtype a16w4 --tokens 1 --stage 1 --format csv
check "the default is the kernel tilelab ships, named in the row" -- test "$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col geometry)","$(col time_us)")" = "tilelab,$k_t"
# the conversion to BF16 makes it compute-bound; on tiles 16x padding the limiter says so (Table 3's word)
check "it charges a16w4's dequantization" -- awk -F, -v c="$(col compute_us)" -v m="$(col memory_us)" -v l="$(col limiter)" \
  'END {exit !($c > $m && $l == "padding")}' <<<"$LAST_OUT"
expect 0 "sim moe --kernel generic" -- "$tl" sim moe --hw h200 --dtype a16w4 --tokens 1 --stage 1 --kernel generic --format csv
k_g=$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col time_us)")
check "the tilelab kernel's geometry changes the prediction" -- test "$k_t" != "$k_g"
expect 0 "sim moe names its kernel" -- "$tl" sim moe --hw h200 --tokens 1 --stage 1
check "describe line says kernel tilelab" -- grep -q "kernel tilelab" <<<"$LAST_ERR$LAST_OUT"
expect 2 "sim moe --kernel bogus" -- "$tl" sim moe --kernel bogus

# ---- the row's columns: what was simulated, and exact counts ----
expect 0 "sim moe names its problem in every row" -- "$tl" sim moe --dtype bf16 --tokens 1 --stage 1 --tp 2 --routing random --seed 9 --kernel generic --format csv
hdr=$(head -1 <<<"$LAST_OUT")
row=$(tail -1 <<<"$LAST_OUT")
for c in tp routing seed geometry tile_m tile_n; do
  check "sim moe has a $c column" -- test -n "$(col $c)"
done
check "tp, routing, seed and the kernel's geometry are the ones asked" -- test "$(cut -d, -f"$(col tp)","$(col routing)","$(col seed)","$(col geometry)" <<<"$row")" = "2,random,9,generic"
expect 0 "sim moe bf16 M=1, routed experts only" -- "$tl" sim moe --dtype bf16 --tokens 1 --stage 1 --shared 0 --format csv
hdr=$(head -1 <<<"$LAST_OUT")
check "weight bytes are exact: 8 experts x 4096 x 7168 x 2 = 469762048" -- test "$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col weight_bytes)")" = "469762048"
check "FLOPs are exact: 2 x 8 x 4096 x 7168 = 469762048" -- test "$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col flops_useful)")" = "469762048"
check "bandwidth is in TB/s" -- test -n "$(col hbm_tbps)"
expect 0 "sim moe bf16 M=1 with the config's shared expert" -- "$tl" sim moe --dtype bf16 --tokens 1 --stage 1 --kernel generic --format csv
check "the shared expert is a ninth expert: 9 x 4096 x 7168 x 2 weight bytes, shared 1" -- \
  test "$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col shared)","$(col tiles)","$(col weight_bytes)")" = "1,9,528482304"
expect 0 "sim moe names what of the config it does not model" -- "$tl" sim moe --tokens 1 --stage 1
check "the unused config keys are named" -- grep -q "not modelled: .*vocab_size" <<<"$LAST_OUT"
# ---- sim amd-code: the build's table of the AMD kernels' loops, beside llvm-mca ----
expect 0 "sim amd-code lists the gfx950 prefill kernels" -- "$tl" sim amd-code --hw mi355x --kernel pf_kernel --format csv
hdr=$(head -1 <<<"$LAST_OUT")
check "four gfx950 prefill instances with a loop" -- test "$(tail -n +2 <<<"$LAST_OUT" | wc -l)" -eq 4
check "every row has llvm-mca's clocks and ours" -- test -z "$(tail -n +2 <<<"$LAST_OUT" | cut -d, -f"$(col mca_clk)","$(col one_wave_clk)" | grep -E '(^|,)(0|0\.0)?(,|$)')"
check "the FP8 instance holds 16 scaled MFMAs a tile" -- grep -q "Lb1EEv6PfArgs.*16 x v_mfma_scale_f32_16x16x128_f8f6f4 fp8" <<<"$LAST_OUT"
expect 0 "sim amd-code on mi300x reads gfx942" -- "$tl" sim amd-code --hw mi300x --kernel indexer_kernel --format csv
check "gfx942's indexer multiplies 16x16x32 FP8" -- grep -q "v_mfma_f32_16x16x32_fp8_fp8" <<<"$LAST_OUT"
expect 2 "sim amd-code on an NVIDIA preset is refused" -- "$tl" sim amd-code --hw h200
expect 2 "sim amd-code with a kernel text that matches none" -- "$tl" sim amd-code --kernel no_such_kernel
expect 0 "sim prefill on mi355x says its compute came from the code" -- "$tl" sim prefill --hw mi355x --seq 16384 --dtype fp8 --format csv
hdr=$(head -1 <<<"$LAST_OUT")
row=$(tail -1 <<<"$LAST_OUT")
check "code asm, a loop bound and llvm-mca's clocks" -- test "$(cut -d, -f"$(col code)" <<<"$row")" = asm -a -n "$(cut -d, -f"$(col loop_bound)" <<<"$row")"
expect 0 "sim prefill on h200 has no AMD code" -- "$tl" sim prefill --hw h200 --seq 1024 --format csv
hdr=$(head -1 <<<"$LAST_OUT")
check "code estimate on h200" -- test "$(tail -1 <<<"$LAST_OUT" | cut -d, -f"$(col code)")" = estimate
finish
