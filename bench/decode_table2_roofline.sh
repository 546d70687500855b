#!/usr/bin/env bash
# Seed 000 Table 2's four paged-decode shapes on two rooflines (issue 19's picture), no GPU needed:
#   bench/results/decode_table2_mi355x.png  the model on the MI355X preset, and the seed's measured
#                                            AITER pa_fwd_asm figures (Table 2's TFLOP/s)
#   bench/results/decode_table2_h200.png    the model on the H200 preset, and tilelab's kernel as
#                                            decode run 51 measured it (variant v1: the committed
#                                            launch; Table 2's fp8 GQA 16 shape was not measured)
# A point's FLOPs and bytes are the model's count (sim paged-decode) for every set, so the sets
# differ in time only. Usage: bash bench/decode_table2_roofline.sh [TILELAB]   (default build/tilelab)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-build/tilelab}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# kv B L kv_heads gqa seed_tflops name-in-the-bench
shapes=("bf16 32 16384 16 1 6.0" "fp8 32 65536 8 4 43.2" "bf16 128 16384 4 16 93.6" "fp8 32 65536 8 16 172.4")
header="name,flops,hbm_bytes,time_us"
for hw in mi355x h200; do printf '# simulated on preset %s (sim paged-decode)\n%s\n' "$hw" "$header" >"$tmp/sim_$hw.csv"; done
printf '# measured by seed 000 Table 2 (AITER pa_fwd_asm on MI355X)\n%s\n' "$header" >"$tmp/seed.csv"
printf '# measured on NVIDIA H200 2026-12-02, decode run 51\n%s\n' "$header" >"$tmp/h200.csv"
run51=bench/results/h200_decode_bench_run51.csv
for s in "${shapes[@]}"; do
  read -r kv B L H G tf <<<"$s"
  label="$kv B=$B L=$L gqa=$G"
  for hw in mi355x h200; do
    row=$("$T" sim paged-decode --hw "$hw" --kv-dtype "$kv" --gqa "$G" --batch "$B" --seq "$L" --kv-heads "$H" \
          --format csv | tail -n 1)
    IFS=, read -r _ _ _ _ _ _ _ _ flops bytes _ us _ <<<"$row"
    echo "$label,$flops,$bytes,$us" >>"$tmp/sim_$hw.csv"
    if [ "$hw" = mi355x ]; then
      echo "$label,$flops,$bytes,$(awk -v f="$flops" -v t="$tf" 'BEGIN { printf "%.2f", f / (t * 1e6) }')" >>"$tmp/seed.csv"
    else
      us=$(awk -F, -v n="B=$B L=$L gqa=$G" -v kv="$kv" '$1 == "v1" && $2 == n && $4 == kv { print $11; exit }' "$run51")
      [ -n "$us" ] && echo "$label,$flops,$bytes,$us" >>"$tmp/h200.csv"
    fi
  done
done
"$T" draw roofline --hw mi355x --points "$tmp/sim_mi355x.csv" --points "$tmp/seed.csv" \
     -o bench/results/decode_table2_mi355x.png
"$T" draw roofline --hw h200 --points "$tmp/sim_h200.csv" --points "$tmp/h200.csv" \
     -o bench/results/decode_table2_h200.png
