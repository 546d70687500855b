#!/usr/bin/env bash
# README's "The MI355X model against the seed": every MI355X figure of seeds 000 and 003 that the
# model predicts, beside the model's figure for tilelab's own AMD kernel (`tilelab sim ... --hw
# mi355x`, whose gfx950 costs come from the build's assembly: simulator/amd_code.h), the ratio
# model / seed, and why a ratio lies outside 0.8-1.25. Prints the Markdown table on stdout; no GPU.
# Usage: bash bench/mi355x_seed_table.sh [TILELAB]   (default build/tilelab). Cost: a few seconds.
set -euo pipefail
T0=${1:-build/tilelab}
T() { "$T0" "$@" 2>/dev/null; } # the tables' titles go to stderr
T=T
col() { # col NAME: the column NAME of a CSV on stdin, one value a data row
  awk -F, -v n="$1" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == n) c = i; next} {print $c}'
}
fmt() { awk '{printf "%s%s", (NR > 1 ? " / " : ""), $0} END {print ""}'; }
ratios() { # ratios "SEED..." "MODEL...": model / seed, each
  awk -v s="$1" -v m="$2" 'BEGIN {n = split(s, a, " "); split(m, b, " ");
    for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " / " : ""), b[i] / a[i]; print ""}'
}
row() { # row FIGURE "SEED..." "MODEL..." REASON
  echo "| $1 | ${2// / \/ } | ${3// / \/ } | $(ratios "$2" "$3") | $4 |"
}
echo "| seed figure (MI355X) | seed | tilelab model | model / seed | why, where outside 0.8-1.25 |"
echo "|---|---|---|---|---|"

# A2: the lightning indexer, TFLOP/s, causal squares and the skinny shapes (prefix = kv - rows)
for H in 32 64; do
  m=$(for n in 4096 8192 16384 32768 65536; do $T sim indexer --hw mi355x --heads $H --rows $n --kv $n --format csv | col tflops; done | xargs printf '%.0f ' | sed 's/ $//')
  if [ $H = 32 ]; then s="852 1142 1040 1019 1026"; else s="1411 1531 1588 1613 1562"; fi
  row "A2 indexer H=$H squares 4K, 8K, 16K, 32K, 64K (TFLOP/s)" "$s" "$m" \
    "the loop's VALU bounds it (H=32: 53 VALU for 2 MFMAs a 16-position fragment, 212 of 64 matrix clocks); the model charges no waits (19 s_waitcnt a fragment on LDS reads) and no head-sum shuffle latency: a profile's stall counts would measure them. No cliff at 32K: the L2 hit share falls smoothly (1.00, 0.78, 0.39)"
done
for H in 32 64; do
  m=$(for s in "2048 16384" "2048 32768" "2048 65536" "4096 65536"; do set -- $s
        $T sim indexer --hw mi355x --heads $H --rows $1 --kv $2 --format csv | col tflops; done | xargs printf '%.0f ' | sed 's/ $//')
  if [ $H = 32 ]; then s="921 551 630 1006"; else s="1437 898 1045 1176"; fi
  row "A2 indexer H=$H skinny 2048x16K, 2048x32K, 2048x64K, 4096x64K" "$s" "$m" \
    "as the squares, and the 32K loss is missed: the model's L2 hit share (0.78 at 32K) is an estimate; the seed's 32K below 64K says the L2 thrashes once K passes 4 MiB, which an L2 hit-rate counter (rocprofv3 TCC_HIT / TCC_MISS) would measure"
done

# A3 / Table 4 / Fig 8: top-k k = 512, one request (and 32 at 1M)
m=$($T sim topk --hw mi355x --n 4096,65536,262144,1048576 --batch 1 --k 512 --format csv | col time_us | xargs printf '%.1f ' | sed 's/ $//')
row "A3 top-k k=512, B=1, 4K, 64K, 256K, 1M (us)" "11.2 30.5 43.1 67.2" "$m" \
  "tilelab's kernel differs by design: at 1M it splits a row over 512 blocks (resident path) where the seed's uses 32; the model's block life (one pass, barriers, a merge of 8-512 lists) has no measured constant on AMD (launch_us, hbm latency are estimates): a timed run would fit them"
m=$($T sim topk --hw mi355x --n 1048576 --batch 32 --k 512 --format csv | col time_us | xargs printf '%.1f ' | sed 's/ $//')
row "Table 4 top-k B=32 at 1M (us)" "139.2" "$m" "as above: the model's block life (latency-bound, the scores read at 2.4 TB/s) with AMD latencies that are estimates; the seed's kernel reads them at 0.96 TB/s"
m=$($T sim topk --hw mi355x --n 1048576 --batch 1 --k 512 --format csv | col split)
row "Fig 8 split at 1M (blocks)" "32" "$m" "the model's pick for tilelab's resident path (512 blocks of 2048 positions, each its own radix select) against the seed's 32 blocks of 8 loads a thread"

# A3: dual-scope decode per call, DeepSeek-V4 (128 heads, top-k 512 + window 128), B = 1..32
m=$($T sim decode --kind dual-scope --hw mi355x --batch 1,2,4,8,16,32 --topk 512 --heads 128 --format csv | col time_us | xargs printf '%.2f ' | sed 's/ $//')
row "A3 dual-scope per call, B=1, 2, 4, 8, 16, 32 (us)" "17.6 20.8 24.5 30.6 40.2 54.6" "$m" \
  "B=16 at 0.79: the seed's kernel slows faster with the batch than the model's shards do (the model keeps one wave of groups; its launch_us, item_fixed_us and the merge's launch are estimates, not measured on an MI355X)"

# Table 2: paged decode (AITER pa_fwd_asm), TFLOP/s
m=$(for s in "bf16 32 16384 16 1" "fp8 32 65536 8 4" "bf16 128 16384 4 16" "fp8 32 65536 8 16"; do read -r kv B L H G <<<"$s"
      $T sim paged-decode --hw mi355x --kv-dtype $kv --gqa $G --batch $B --seq $L --kv-heads $H --format csv | col tflops; done | xargs printf '%.1f ' | sed 's/ $//')
row "Table 2 paged decode TFLOP/s (bf16 gqa1, fp8 gqa4, bf16 gqa16, fp8 gqa16)" "6.0 43.2 93.6 172.4" "$m" ""

# seed 003: causal prefill at 16K (Mistral-7B's GQA shape), TFLOP/s
b=$($T sim prefill --hw mi355x --shape mistral-7b --seq 16384 --dtype bf16 --format csv | col tflops)
f=$($T sim prefill --hw mi355x --shape mistral-7b --seq 16384 --dtype fp8 --format csv | col tflops)
row "003 prefill 16K, FP8 and BF16 (TFLOP/s)" "2537 1223" "$(printf '%.0f %.0f' "$f" "$b")" \
  "BF16: tilelab's AMD kernel stages S and P through LDS (278 VALU + 17 v_exp a 64-key tile, valu-bound at 1384 clocks against 512 of MFMAs): a kernel of the FP8 path's design would lift it. FP8: valu-bound at 1324 clocks a 128-key tile against 512 of MFMAs, its 32 v_exp_f32 alone 512 at the quarter rate the preset assumes (16 a CU a clock); CDNA4's faster transcendentals are not in the preset without a documented rate: a v_exp_f32 loop on the device would measure it"
row "003 prefill 16K, FP8 / BF16" "2.07" "$(awk -v f="$f" -v b="$b" 'BEGIN {printf "%.2f", f / b}')" ""

# Table 3: the MoE GEMM paths (DeepSeek-V3.2 / Kimi-K2.6); intensity counted as issued FLOPs
i=$($T sim moe --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 1 --stage 1 --format csv | awk -F, 'NR == 2 {printf "%.1f", $18 / $19}')
row "Table 3 FP8 block-scaled intensity, issued FLOPs / HBM byte (M=1, tile padding 16)" "31.8" "$i" "the seed's median over its shapes (padding 6.9x median, 16x at M=1); ours at M=1"
lim() { $T sim moe --hw mi355x --model "$1" --dtype "$2" --tokens "$3" --stage 1 --format csv | col limiter; }
echo "| Table 3 limited by: dense BF16 (M=256), FP8 block-scaled (M=1, M=256), a16w4 (M=1, Kimi-K2.6) | HBM; overhead at low M, HBM at mid M; padding at low M | $(lim deepseek-v3.2 bf16 256); $(lim deepseek-v3.2 fp8 1), $(lim deepseek-v3.2 fp8 256); $(lim kimi-k2.6 a16w4 1) | | the model puts the low-M FP8 stage on HBM where the seed's AITER path was bound by its fixed overhead: tilelab's fused kernel loads each weight tile once whatever its padding; a16w4 padding-bound as the seed; the FP8 split path (3 kernels) is not a design tilelab ships |"
echo "| Fig 10 crossovers (fused MoE against AITER / vLLM, A1) | speedups 0.54-2.03 | not predicted | | the peers' kernels (AITER, vLLM Triton WNA16) are not modelled: a ratio against them needs their times |"
